package streams

import (
	"context"
	"errors"
	"fmt"

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
// watermill's router middleware, a file and a test each: Retry (retry.go),
// Timeout (timeout.go), Recover (recover.go). The loop measures every call
// itself (LoopMetrics).
type Middleware func(Handler) Handler

// Chain applies middleware to h, the first outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

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
