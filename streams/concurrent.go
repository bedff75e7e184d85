package streams

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Semaphore bounds the records a concurrent loop has in flight.
type Semaphore interface {
	// Acquire takes a slot, waiting for one until ctx ends.
	Acquire(ctx context.Context) error
	// Release gives back a slot taken.
	Release()
}

// Slots is a Semaphore of a fixed number of slots, first come first served.
type Slots chan struct{}

// NewSlots returns n slots.
func NewSlots(n int) Slots { return make(Slots, n) }

func (s Slots) Acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s Slots) Release() { <-s }

// flights are a partition's records handled concurrently: started in
// offset order, finished in any. The commit mark follows the finished
// prefix, so a slow record holds back the commit of the records after it,
// never their handling.
type flights struct {
	mu      sync.Mutex
	started []*flight          // not yet committed, in offset order
	last    map[string]*flight // the last started record of each key
	wg      sync.WaitGroup
}

type flight struct {
	r        *kgo.Record
	done     chan struct{} // closed when the record is finished or abandoned
	finished bool
}

func newFlights() *flights { return &flights{last: map[string]*flight{}} }

// start registers r and returns its flight and the flight of the record of
// the same key before it, if that one is still in flight.
func (fs *flights) start(r *kgo.Record) (f, prev *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f = &flight{r: r, done: make(chan struct{})}
	prev = fs.last[string(r.Key)]
	fs.last[string(r.Key)] = f
	fs.started = append(fs.started, f)
	return f, prev
}

// finish marks f finished and returns the last record of the finished
// prefix, to commit up to, or nil.
func (fs *flights) finish(f *flight) *kgo.Record {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.finished = true
	if fs.last[string(f.r.Key)] == f {
		delete(fs.last, string(f.r.Key))
	}
	var upTo *kgo.Record
	for len(fs.started) > 0 && fs.started[0].finished {
		upTo = fs.started[0].r
		fs.started[0] = nil
		fs.started = fs.started[1:]
	}
	return upTo
}

// handleConcurrent starts the handling of recs, each once it has a slot and
// the record of its key before it is finished, and returns: the records
// finish on goroutines the partition's worker waits for when it stops. A
// record that fails permanently is dead-lettered; a fatal failure stops the
// loop.
func (l *Loop) handleConcurrent(ctx context.Context, w *worker, recs []*kgo.Record) error {
	for _, r := range recs {
		if r.Attrs.IsControl() {
			// A transaction marker: finished as it starts, committed
			// once the records before it are.
			f, _ := w.flights.start(r)
			close(f.done)
			if upTo := w.flights.finish(f); upTo != nil {
				l.done(w, upTo)
			}
			continue
		}
		if err := l.slots.Acquire(ctx); err != nil {
			return err
		}
		f, prev := w.flights.start(r)
		w.flights.wg.Add(1)
		l.runners.run(func() {
			defer w.flights.wg.Done()
			defer close(f.done)
			defer l.slots.Release()
			if prev != nil {
				select {
				case <-prev.done:
				case <-ctx.Done():
					return
				}
			}
			if err := l.one(ctx, w, r); err != nil {
				if ctx.Err() == nil {
					l.fail(err)
				}
				return // not finished: read again after the restart
			}
			if upTo := w.flights.finish(f); upTo != nil {
				l.done(w, upTo)
			}
		})
	}
	return nil
}

// runners are the goroutines a concurrent loop handles its records on,
// kept from one record to the next: a goroutine per record grew a new
// stack for each (runtime.morestack was 6 % of the scheduler bench's CPU).
// There are about as many as the loop ever had records in flight at once
// (its slots; a runner between two jobs may not be back yet when the next
// comes); they end with the loop's Run, which waits for them.
type runners struct {
	jobs    chan func() // unbuffered: a send succeeds when a runner is idle
	stop    chan struct{}
	wg      sync.WaitGroup
	started atomic.Int64 // runners started, for the tests
}

func newRunners() *runners { return &runners{jobs: make(chan func()), stop: make(chan struct{})} }

// run hands job to an idle runner, or to a new one.
func (rs *runners) run(job func()) {
	select {
	case rs.jobs <- job:
		return
	default:
	}
	rs.wg.Add(1)
	rs.started.Add(1)
	go func() {
		defer rs.wg.Done()
		for {
			job()
			select {
			case job = <-rs.jobs:
			case <-rs.stop:
				return
			}
		}
	}()
}

// close ends the runners once their jobs are done; no job may be run after.
func (rs *runners) close() {
	close(rs.stop)
	rs.wg.Wait()
}

// one handles r with retries, or dead-letters it; an error is fatal (or
// ctx's).
func (l *Loop) one(ctx context.Context, w *worker, r *kgo.Record) error {
	err := l.try(ctx, r, func(ctx context.Context) error { return l.handler(ctx, r) })
	switch {
	case err == nil:
		l.count("handled", 1)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case IsFatal(err):
		return err
	default:
		return l.dead(ctx, w, r, reason(err))
	}
}
