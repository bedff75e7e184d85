package streams

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRecover: Recover turns a panic into a permanent error naming it, and
// leaves a handler that does not panic alone.
func TestRecover(t *testing.T) {
	ctx := context.Background()
	panics := func(context.Context, *kgo.Record) error { panic("boom") }
	if err := Chain(panics, Recover())(ctx, &kgo.Record{}); !IsPermanent(err) || !strings.Contains(err.Error(), "panicked: boom") {
		t.Fatalf("panics: %v", err)
	}
	if err := Chain(func(context.Context, *kgo.Record) error { return nil }, Recover())(ctx, &kgo.Record{}); err != nil {
		t.Fatalf("calm: %v", err)
	}
}
