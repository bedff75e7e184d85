package scheduler

import (
	"context"
	"math"
	"slices"
	"sync"
)

// slots are a stage's max_parallelism slots, shared by its two queues. A
// slot freed goes to an item of the main queue (fresh changes) first, to
// the low-priority queue (re-crawls) only when no main item waits, except
// one grant in lowEvery while low items wait: re-crawls never starve.
type slots struct {
	mu        sync.Mutex
	free      int
	main, low []chan struct{} // waiting items, first come first served
	grants    int
	lowEvery  int
}

// newSlots returns n slots of which lowShare go to the low-priority queue
// while both queues wait.
func newSlots(n int, lowShare float64) *slots {
	every := math.MaxInt
	if lowShare > 0 {
		every = max(1, int(math.Round(1/lowShare)))
	}
	return &slots{free: n, lowEvery: every}
}

func (s *slots) acquire(ctx context.Context, low bool) error {
	s.mu.Lock()
	if s.free > 0 && (!low || len(s.main) == 0) {
		s.free--
		s.mu.Unlock()
		return nil
	}
	granted := make(chan struct{}, 1)
	if low {
		s.low = append(s.low, granted)
	} else {
		s.main = append(s.main, granted)
	}
	s.mu.Unlock()
	select {
	case <-granted:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		waiting := len(s.main) + len(s.low)
		s.main = slices.DeleteFunc(s.main, func(c chan struct{}) bool { return c == granted })
		s.low = slices.DeleteFunc(s.low, func(c chan struct{}) bool { return c == granted })
		stillWaiting := len(s.main)+len(s.low) < waiting
		s.mu.Unlock()
		if !stillWaiting {
			s.release() // granted as ctx ended: pass the slot on
		}
		return ctx.Err()
	}
}

func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants++
	var next chan struct{}
	switch {
	case len(s.low) > 0 && (len(s.main) == 0 || s.grants%s.lowEvery == 0):
		next, s.low = s.low[0], s.low[1:]
	case len(s.main) > 0:
		next, s.main = s.main[0], s.main[1:]
	default:
		s.free++
		return
	}
	next <- struct{}{}
}

// queueSlots are the slots as one queue's loop takes them.
type queueSlots struct {
	s   *slots
	low bool
}

func (q queueSlots) Acquire(ctx context.Context) error { return q.s.acquire(ctx, q.low) }
func (q queueSlots) Release()                          { q.s.release() }
