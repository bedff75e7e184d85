package streams

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Timeout returns middleware that gives each call of the handler at most d
// (0: no limit). A call that runs out fails with a retryable error.
func Timeout(d time.Duration) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			return withTimeout(ctx, d, func(ctx context.Context) error { return h(ctx, r) })
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
