package streams

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Backoff is how a failing record is retried: waits start at Initial and
// double up to Max; after Attempts calls (0: never give up) the record is
// dead-lettered.
type Backoff struct {
	Initial, Max time.Duration
	Attempts     int
}

// DefaultBackoff retries from 100 ms doubling to 10 s, 10 calls in all.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Attempts: 10}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max < b.Initial {
		b.Max = max(DefaultBackoff.Max, b.Initial)
	}
	return b
}

// Ceiling returns the longest wait before call number attempt+1, after
// attempt calls failed (attempt ≥ 1): Initial doubled attempt-1 times, at
// most Max. Something due at a time computed again later (the indexer's
// retry queue) waits this, the same every time.
func (b Backoff) Ceiling(attempt int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Wait returns the wait before call number attempt+1: a random point of
// the upper half of Ceiling(attempt) ("equal jitter"), so that replicas
// failing together (against one YDB, one stage) do not retry in step, and
// every wait is still at least half the ceiling.
func (b Backoff) Wait(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	return c/2 + rand.N(c/2+1)
}

// GaveUpError is what Retry returns when every attempt failed.
type GaveUpError struct {
	Attempts int
	Err      error
}

func (e *GaveUpError) Error() string { return fmt.Sprintf("failed %d times: %v", e.Attempts, e.Err) }
func (e *GaveUpError) Unwrap() error { return e.Err }

// retry calls fn until it succeeds, fails permanently or fatally, ctx ends,
// or b's attempts are spent (then a *GaveUpError). onRetry, if not nil, is
// called before each wait.
func retry(ctx context.Context, b Backoff, onRetry func(attempt int, err error), fn func(context.Context) error) error {
	b = b.withDefaults()
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || IsPermanent(err) || IsFatal(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.Attempts > 0 && attempt >= b.Attempts {
			return &GaveUpError{Attempts: attempt, Err: err}
		}
		if onRetry != nil {
			onRetry(attempt, err)
		}
		t := time.NewTimer(b.Wait(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Retry returns middleware that calls the handler again with backoff while
// it fails with an error that is neither permanent nor fatal.
func Retry(b Backoff) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			return retry(ctx, b, nil, func(ctx context.Context) error { return h(ctx, r) })
		}
	}
}
