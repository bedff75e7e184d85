package streams

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Handler handles one record. It returns nil once the record's effects are
// durable (written and acknowledged), a Permanent error for a record that can
// never be handled (it goes to the dead-letter topic at once), a Fatal error
// to stop the loop, and any other error for a failure worth retrying.
// Handlers of one partition are called one record at a time, in offset order;
// handlers of different partitions run concurrently.
type Handler func(ctx context.Context, r *kgo.Record) error

// Middleware wraps a Handler with behaviour around it, in the shape of
// watermill's router middleware: retry, timeout, recovery, metrics.
type Middleware func(Handler) Handler

// PermanentError marks a failure that retrying cannot fix: the record does
// not decode, does not validate, or names what does not exist.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent returns err marked permanent (nil for nil): the loop dead-letters
// the record with err as the reason and moves on, without retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Permanentf is Permanent(fmt.Errorf(format, args...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// IsPermanent reports whether err, or one it wraps, is a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// FatalError marks a failure that no record-level action can get past (a
// broken store, a lost lock): the loop stops, commits nothing more, and
// returns it to its supervisor, which restarts the component.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

// Fatal returns err marked fatal (nil for nil).
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &FatalError{Err: err}
}

// IsFatal reports whether err, or one it wraps, is a FatalError.
func IsFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}

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

// Timeout returns middleware that gives each call of the handler at most d
// (0: no limit). A call that runs out fails with a retryable error.
func Timeout(d time.Duration) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			return withTimeout(ctx, d, func(ctx context.Context) error { return h(ctx, r) })
		}
	}
}

// Recover returns middleware that turns a panic of the handler into a
// permanent error naming it, so one bad record cannot crash the process.
func Recover() Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			return recovered(ctx, func(ctx context.Context) error { return h(ctx, r) })
		}
	}
}

func withTimeout(ctx context.Context, d time.Duration, fn func(context.Context) error) error {
	if d <= 0 {
		return fn(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

func recovered(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	return fn(ctx)
}

// Chain applies middleware to h, the first outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}
