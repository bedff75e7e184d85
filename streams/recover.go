package streams

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Recover returns middleware that turns a panic of the handler into a
// permanent error naming it, so one bad record cannot crash the process.
func Recover() Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			return recovered(ctx, func(ctx context.Context) error { return h(ctx, r) })
		}
	}
}

func recovered(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	return fn(ctx)
}
