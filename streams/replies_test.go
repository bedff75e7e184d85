package streams

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRepliesWaitersAreBounded(t *testing.T) {
	r := NewReplies("t", time.Minute, nil, func([]byte) (int, RequestID, error) { return 0, RequestID{}, nil })
	r.limit = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := r.Wait(ctx, RequestID{Offset: int64(i)})
			errs <- err
		}()
	}
	// Once two wait, a third is refused at once, not queued.
	for {
		r.mu.Lock()
		n := len(r.waiters)
		r.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := r.Wait(ctx, RequestID{Offset: 9}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third waiter: %v, want ErrBusy", err)
	}
	// A reply frees its waiter's place.
	r.deliver(RequestID{Offset: 0}, 7)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	r.deliver(RequestID{Offset: 9}, 8)
	if v, err := r.Wait(ctx, RequestID{Offset: 9}); err != nil || v != 8 {
		t.Fatalf("after a reply freed a place: %v %v", v, err)
	}
	cancel()
	if err := <-errs; !errors.Is(err, ErrNoReply) {
		t.Fatal(err)
	}
}
