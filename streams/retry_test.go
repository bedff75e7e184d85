package streams

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRetry: Retry calls again until success and gives up after its
// attempts; a permanent error is not retried.
func TestRetry(t *testing.T) {
	b := Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 3}
	calls := 0
	flaky := func(context.Context, *kgo.Record) error {
		if calls++; calls < 3 {
			return errors.New("transient")
		}
		return nil
	}
	ctx := context.Background()
	if err := Chain(flaky, Retry(b))(ctx, &kgo.Record{}); err != nil || calls != 3 {
		t.Fatalf("flaky: %v after %d calls", err, calls)
	}
	calls = 0
	broken := func(context.Context, *kgo.Record) error { calls++; return errors.New("broken") }
	var gaveUp *GaveUpError
	if err := Chain(broken, Retry(b))(ctx, &kgo.Record{}); !errors.As(err, &gaveUp) || gaveUp.Attempts != 3 || calls != 3 {
		t.Fatalf("broken: %v after %d calls", err, calls)
	}
	calls = 0
	poison := func(context.Context, *kgo.Record) error { calls++; return Permanentf("undecodable") }
	if err := Chain(poison, Retry(b))(ctx, &kgo.Record{}); !IsPermanent(err) || calls != 1 {
		t.Fatalf("poison: %v after %d calls", err, calls)
	}
}

func TestBackoffJitters(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	if got := b.Ceiling(3); got != 400*time.Millisecond {
		t.Fatalf("ceiling of the third wait: %v, want 400ms", got)
	}
	if got := b.Ceiling(10); got != time.Second {
		t.Fatalf("ceiling past Max: %v", got)
	}
	seen := map[time.Duration]bool{}
	for range 200 {
		w := b.Wait(3)
		if w < 200*time.Millisecond || w > 400*time.Millisecond {
			t.Fatalf("wait %v outside the upper half of 400ms", w)
		}
		seen[w] = true
	}
	if len(seen) < 50 {
		t.Errorf("200 waits took %d values: replicas would retry in step", len(seen))
	}
}
