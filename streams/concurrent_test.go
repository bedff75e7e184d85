package streams

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRunnersAreKeptBetweenJobs runs 2 000 jobs, at most 4 at a time, as a
// concurrent loop does: they run on a few goroutines kept between jobs, not
// on one each, and close waits for them.
func TestRunnersAreKeptBetweenJobs(t *testing.T) {
	rs := newRunners()
	slots := NewSlots(4)
	var wg sync.WaitGroup
	var ran, inFlight, most atomic.Int64
	for range 2000 {
		if err := slots.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		rs.run(func() {
			defer wg.Done()
			defer slots.Release()
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			ran.Add(1)
			inFlight.Add(-1)
		})
	}
	wg.Wait()
	rs.close()
	if ran.Load() != 2000 || most.Load() > 4 {
		t.Fatalf("%d jobs ran, at most %d at once; want 2000, at most 4", ran.Load(), most.Load())
	}
	// A runner is back for a job once it has released its slot and waits:
	// a few more than the slots can be started, never one per job.
	if n := rs.started.Load(); n > 100 {
		t.Fatalf("%d runners were started for 2000 jobs 4 at a time", n)
	}
	t.Logf("%d runners ran 2000 jobs", rs.started.Load())
}
