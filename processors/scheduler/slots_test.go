package scheduler

import (
	"context"
	"testing"
	"time"
)

// TestSlotsGoToFreshChangesFirst: a freed slot goes to a waiting main item
// before any low one, but one grant in 1/lowShare goes to a low one while
// both wait; a waiter whose context ends leaves the queue.
func TestSlotsGoToFreshChangesFirst(t *testing.T) {
	s := newSlots(1, 0.25)
	ctx := context.Background()
	if err := s.acquire(ctx, true); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 20)
	wait := func(name string, low bool) {
		go func() {
			if err := s.acquire(ctx, low); err == nil {
				order <- name
			}
		}()
	}
	// Queued one at a time, so their order in each queue is known.
	queued := func(main, low int) {
		for deadline := time.Now().Add(10 * time.Second); ; {
			s.mu.Lock()
			ok := len(s.main) == main && len(s.low) == low
			s.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("want %d main and %d low waiting", main, low)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := range 4 {
		wait("low", true)
		queued(0, i+1)
	}
	for i := range 6 {
		wait("main", false)
		queued(i+1, 4)
	}
	cancelled, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- s.acquire(cancelled, false) }()
	queued(7, 4)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled wait was granted")
	}
	queued(6, 4)

	var got []string
	for range 10 {
		s.release()
		got = append(got, <-order)
	}
	// Grants 1..10: the 4th and 8th go to low while main waits; once main
	// is served, low takes the rest.
	want := []string{"main", "main", "main", "low", "main", "main", "main", "low", "low", "low"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("grants %v, want %v", got, want)
		}
	}
	s.release()
	if s.free != 1 {
		t.Fatalf("%d free slots after every release, want 1", s.free)
	}
}
