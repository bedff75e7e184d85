package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// TestRepliesKeepTheNewestEarlyReplies: a reply that comes before its
// waiter registers is kept even when the matcher holds as many unclaimed
// replies as it may (those of other producers, after a bulk load): the
// oldest go. Before, the newest was dropped and its waiter timed out.
func TestRepliesKeepTheNewestEarlyReplies(t *testing.T) {
	r := NewReplies("t", time.Hour, nil, func([]byte) (int, RequestID, error) { return 0, RequestID{}, nil })
	r.earlyLimit = 4
	for i := range 10 { // replies to other producers' requests: nobody waits
		r.deliver(RequestID{Offset: int64(i)}, i)
	}
	r.deliver(RequestID{Partition: 1, Offset: 5}, 42) // before its waiter
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if v, err := r.Wait(ctx, RequestID{Partition: 1, Offset: 5}); err != nil || v != 42 {
		t.Fatalf("the newest early reply: %v %v, want 42", v, err)
	}
	r.mu.Lock()
	kept, arrivals := len(r.early), len(r.arrivals)
	_, oldest := r.early[RequestID{Offset: 0}]
	_, newer := r.early[RequestID{Offset: 9}]
	r.mu.Unlock()
	if kept != 3 || arrivals != 4 || oldest || !newer {
		t.Fatalf("kept %d replies and %d arrivals (the oldest kept: %v, offset 9: %v), want 3 and 4, the oldest gone",
			kept, arrivals, oldest, newer)
	}
}

func TestRepliesExpireTheOldestFirst(t *testing.T) {
	r := NewReplies("t", time.Hour, nil, func([]byte) (int, RequestID, error) { return 0, RequestID{}, nil })
	old, taken, fresh := RequestID{Offset: 1}, RequestID{Offset: 2}, RequestID{Offset: 3}
	r.deliver(old, 1)
	r.deliver(taken, 2)
	r.mu.Lock()
	e := r.early[old]
	e.at = e.at.Add(-2 * time.Hour)
	r.early[old] = e
	r.mu.Unlock()
	if v, err := r.Wait(context.Background(), taken); err != nil || v != 2 {
		t.Fatalf("an early reply: %v %v", v, err)
	}
	r.deliver(fresh, 3)
	r.deliver(fresh, 4) // a redelivery replaces the reply kept
	r.expire()
	r.mu.Lock()
	_, oldKept := r.early[old]
	got, freshKept := r.early[fresh]
	n := len(r.arrivals)
	r.mu.Unlock()
	// The taken reply's arrival and fresh's first, replaced, go with the
	// expired one: they are in front of the one kept.
	if oldKept || !freshKept || got.v != 4 || n != 1 {
		t.Fatalf("after expiry: old kept %v, fresh kept %v (%v), %d arrivals; want only fresh (4) with its last arrival",
			oldKept, freshKept, got.v, n)
	}
	// Once it has expired too, nothing is left.
	r.mu.Lock()
	got.at = got.at.Add(-2 * time.Hour)
	r.early[fresh] = got
	r.mu.Unlock()
	r.expire()
	if len(r.early) != 0 || len(r.arrivals) != 0 {
		t.Fatalf("left %d replies and %d arrivals", len(r.early), len(r.arrivals))
	}
}

// TestRepliesMatchEveryReplyWhateverComesFirst: waiters that register
// before their reply and after it, concurrently with other producers'
// replies and expiry, all get their own reply (run with -race). The bound
// holds every reply delivered, so none may be pushed out whatever the
// scheduling: eviction is TestRepliesKeepTheNewestEarlyReplies'.
func TestRepliesMatchEveryReplyWhateverComesFirst(t *testing.T) {
	r := NewReplies("t", time.Hour, nil, func([]byte) (int, RequestID, error) { return 0, RequestID{}, nil })
	r.earlyLimit = 1 << 16 // more than every reply delivered here
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := RequestID{Partition: 1, Offset: int64(i)}
			if i%2 == 0 { // half the replies come before their waiter
				r.deliver(id, i)
			}
			v, err := r.Wait(ctx, id)
			if err == nil && v != i {
				err = fmt.Errorf("waiter %d got %d", i, v)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	var others sync.WaitGroup
	others.Go(func() { // other producers' replies, and expiry
		for i := range 20 * n {
			r.deliver(RequestID{Partition: 2, Offset: int64(i)}, -1)
			if i%500 == 0 {
				r.expire()
			}
		}
	})
	// The other half of the replies, once their waiters may or may not be
	// there yet.
	for i := 1; i < n; i += 2 {
		r.deliver(RequestID{Partition: 1, Offset: int64(i)}, i)
	}
	wg.Wait()
	others.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
