package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestChainAppliesTheFirstOutermost: Chain wraps the handler so that the
// first middleware runs first around it, and the error kinds are told
// apart through wrapping.
func TestChainAppliesTheFirstOutermost(t *testing.T) {
	var order []string
	mark := func(name string) Middleware {
		return func(h Handler) Handler {
			return func(ctx context.Context, r *kgo.Record) error {
				order = append(order, name)
				return h(ctx, r)
			}
		}
	}
	h := Chain(func(context.Context, *kgo.Record) error { order = append(order, "handler"); return nil }, mark("a"), mark("b"))
	if err := h(context.Background(), &kgo.Record{}); err != nil || !slices.Equal(order, []string{"a", "b", "handler"}) {
		t.Fatalf("order %v (%v)", order, err)
	}
	wrapped := fmt.Errorf("batch: %w", Permanentf("undecodable"))
	if !IsPermanent(wrapped) || IsFatal(wrapped) {
		t.Errorf("%v: permanent %v, fatal %v", wrapped, IsPermanent(wrapped), IsFatal(wrapped))
	}
	if f := fmt.Errorf("store: %w", Fatal(errors.New("disk"))); !IsFatal(f) || IsPermanent(f) {
		t.Errorf("%v: fatal %v, permanent %v", f, IsFatal(f), IsPermanent(f))
	}
	if Permanent(nil) != nil || Fatal(nil) != nil {
		t.Error("nil marked is not nil")
	}
}
