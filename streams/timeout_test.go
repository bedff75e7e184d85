package streams

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTimeout: Timeout bounds each call, and 0 leaves it unbounded.
func TestTimeout(t *testing.T) {
	ctx := context.Background()
	slow := func(ctx context.Context, _ *kgo.Record) error { <-ctx.Done(); return ctx.Err() }
	if err := Chain(slow, Timeout(10*time.Millisecond))(ctx, &kgo.Record{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow: %v", err)
	}
	unbounded := func(ctx context.Context, _ *kgo.Record) error {
		if _, ok := ctx.Deadline(); ok {
			return errors.New("a deadline")
		}
		return nil
	}
	if err := Chain(unbounded, Timeout(0))(ctx, &kgo.Record{}); err != nil {
		t.Fatalf("Timeout(0): %v", err)
	}
}
