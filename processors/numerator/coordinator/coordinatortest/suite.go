// Package coordinatortest is the contract of coordinator.Coordinator as a
// test suite, run against every implementation.
package coordinatortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offerlog/offerlog/processors/numerator/coordinator"
)

// Clock is a settable clock for the suite; implementations under test take
// its Now.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock at a fixed time.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Factory returns a fresh, empty coordinator using clock; several calls in
// one test must return coordinators that share one state (as masters in
// several processes do).
type Factory func(t *testing.T, clock *Clock) func() coordinator.Coordinator

// Run runs the contract against the implementation made by factory.
func Run(t *testing.T, factory Factory) {
	ctx := context.Background()
	t.Run("one master at a time", func(t *testing.T) {
		clock := NewClock()
		newMaster := factory(t, clock)
		a, b := newMaster(), newMaster()
		la, err := a.Acquire(ctx, "dc-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, "dc-b", time.Minute); !errors.Is(err, coordinator.ErrLocked) {
			t.Fatalf("second master: %v, want ErrLocked", err)
		}
		cur, ok, err := b.Current(ctx)
		if err != nil || !ok || cur.Holder != "dc-a" || cur.Ticket != la.Ticket {
			t.Fatalf("current lock: %+v %v %v", cur, ok, err)
		}
		p := &coordinator.Pointer{Version: "1.0.0.1", Cluster: "kafka-a", Topic: "numerator.states", Offsets: map[int32]int64{0: 10}}
		if err := a.Report(ctx, la.Ticket, p); err != nil {
			t.Fatal(err)
		}
		st, ok, err := b.State(ctx)
		if err != nil || !ok || st.Version != "1.0.0.1" || st.Holder != "dc-a" || st.Ticket != la.Ticket || st.Offsets[0] != 10 {
			t.Fatalf("state after a good report: %+v %v %v", st, ok, err)
		}
		lb, err := b.Acquire(ctx, "dc-b", time.Minute)
		if err != nil || lb.Ticket <= la.Ticket {
			t.Fatalf("lock after release: %+v %v", lb, err)
		}
		if err := a.Report(ctx, la.Ticket, p); !errors.Is(err, coordinator.ErrStaleTicket) {
			t.Fatalf("a second report with an old ticket: %v", err)
		}
	})

	t.Run("a holder that times out is refused", func(t *testing.T) {
		clock := NewClock()
		newMaster := factory(t, clock)
		a, b := newMaster(), newMaster()
		good := &coordinator.Pointer{Version: "1.0.0.1", Cluster: "a", Topic: "t"}
		l0, _ := a.Acquire(ctx, "dc-a", time.Minute)
		if err := a.Report(ctx, l0.Ticket, good); err != nil {
			t.Fatal(err)
		}
		la, err := a.Acquire(ctx, "dc-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		lb, err := b.Acquire(ctx, "dc-b", time.Minute)
		if err != nil {
			t.Fatalf("the lock of a timed-out holder is not free: %v", err)
		}
		if err := a.Report(ctx, la.Ticket, &coordinator.Pointer{Version: "1.0.0.2"}); !errors.Is(err, coordinator.ErrStaleTicket) {
			t.Fatalf("report of the timed-out holder: %v, want ErrStaleTicket", err)
		}
		clock.Advance(2 * time.Minute)
		if err := b.Report(ctx, lb.Ticket, &coordinator.Pointer{Version: "1.0.0.3"}); !errors.Is(err, coordinator.ErrTimedOut) {
			t.Fatalf("a report after the lock timed out: %v, want ErrTimedOut", err)
		}
		st, _, _ := a.State(ctx)
		if st.Version != "1.0.0.1" || st.Ticket != l0.Ticket {
			t.Fatalf("the state pointer moved on a refused report: %+v", st)
		}
		if _, ok, _ := a.Current(ctx); ok {
			t.Fatal("a timed-out lock is still held")
		}
	})

	t.Run("a holder asking again takes its own lock over", func(t *testing.T) {
		// A master that lost track of its lock (a restart, a report
		// that failed on the connection) need not wait for its timeout:
		// it gets a new ticket, and its old one is refused.
		clock := NewClock()
		newMaster := factory(t, clock)
		a, b := newMaster(), newMaster()
		l1, err := a.Acquire(ctx, "dc-a", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := b.Acquire(ctx, "dc-a", time.Hour)
		if err != nil || l2.Ticket <= l1.Ticket {
			t.Fatalf("the holder asking again: %+v %v", l2, err)
		}
		if err := a.Report(ctx, l1.Ticket, &coordinator.Pointer{Version: "1.0.0.1"}); !errors.Is(err, coordinator.ErrStaleTicket) {
			t.Fatalf("the first ticket after the take-over: %v, want ErrStaleTicket", err)
		}
		if _, err := a.Acquire(ctx, "dc-b", time.Hour); !errors.Is(err, coordinator.ErrLocked) {
			t.Fatalf("another holder: %v, want ErrLocked", err)
		}
		if err := b.Report(ctx, l2.Ticket, &coordinator.Pointer{Version: "1.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a failed build frees the lock and keeps the state", func(t *testing.T) {
		clock := NewClock()
		a := factory(t, clock)()
		l, _ := a.Acquire(ctx, "dc-a", time.Minute)
		if err := a.Report(ctx, l.Ticket, nil); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := a.State(ctx); ok {
			t.Fatal("a failed build set the state")
		}
		if _, err := a.Acquire(ctx, "dc-a", time.Minute); err != nil {
			t.Fatalf("lock after a failed build: %v", err)
		}
	})

	t.Run("contending masters get one lock", func(t *testing.T) {
		clock := NewClock()
		newMaster := factory(t, clock)
		const n = 8
		masters := make([]coordinator.Coordinator, n)
		for i := range masters {
			masters[i] = newMaster()
		}
		var wg sync.WaitGroup
		var won atomic.Int32
		errs := make(chan error, n)
		for i, m := range masters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := m.Acquire(ctx, fmt.Sprint("dc-", i), time.Minute)
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, coordinator.ErrLocked):
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if won.Load() != 1 {
			t.Fatalf("%d masters hold the lock", won.Load())
		}
	})

	t.Run("a refused master retries until it gets the lock", func(t *testing.T) {
		clock := NewClock()
		newMaster := factory(t, clock)
		a, b := newMaster(), newMaster()
		la, _ := a.Acquire(ctx, "dc-a", time.Minute)
		got := make(chan coordinator.Lock, 1)
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		go func() {
			l, err := coordinator.AcquireRetry(rctx, b, "dc-b", time.Minute, 10*time.Millisecond, 0)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		if err := a.Report(ctx, la.Ticket, &coordinator.Pointer{Version: "1.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		if l := <-got; l.Holder != "dc-b" || l.Ticket <= la.Ticket {
			t.Fatalf("retried lock: %+v", l)
		}
	})
}
