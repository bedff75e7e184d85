package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RequestID names a request by where it was logged: the partition and
// offset of the request message.
type RequestID struct {
	Partition int32
	Offset    int64
}

// Replies matches replies read from a reply topic to the requests waiting
// for them (request/reply over topics). Start it before producing the first
// request it will wait for. Safe for concurrent use.
type Replies[T any] struct {
	topic  string
	decode func([]byte) (T, RequestID, error)
	keep   time.Duration
	log    *slog.Logger

	// limit overrides MaxWaiters, earlyLimit maxEarly (tests).
	limit, earlyLimit int
	// transit, if set, is told each reply's time from its record's
	// timestamp (its producer's clock) to its decoding here.
	transit func(time.Duration)

	mu      sync.Mutex
	waiters map[RequestID]chan T
	// early holds the replies that came before their waiter, arrivals
	// their order of arrival: the oldest go first, when they expire or to
	// make room. An arrival whose reply was taken, or replaced by a later
	// copy, is passed over (its seq is not the reply's).
	early    map[RequestID]early[T]
	arrivals []arrival
	seq      uint64
	ready    chan struct{}
}

type early[T any] struct {
	v   T
	at  time.Time
	seq uint64
}

type arrival struct {
	id  RequestID
	seq uint64
}

// ErrNoReply is returned by Wait when no reply came in time.
var ErrNoReply = errors.New("no reply in time")

// ErrBusy is returned by Wait when MaxWaiters requests wait already: the
// request is logged, but its reply is not awaited (callers answer 503 with
// Retry-After).
var ErrBusy = errors.New("too many requests waiting for their replies")

// MaxWaiters bounds the requests one matcher waits for at once.
const MaxWaiters = 1 << 16

// NewReplies returns a matcher of replies on topic. decode returns a reply
// and the request it answers. Replies nobody waits for are kept for keep, in
// case their waiter registers late.
func NewReplies[T any](topic string, keep time.Duration, log *slog.Logger, decode func([]byte) (T, RequestID, error)) *Replies[T] {
	return &Replies[T]{topic: topic, decode: decode, keep: keep, log: log,
		waiters: map[RequestID]chan T{}, early: map[RequestID]early[T]{}, ready: make(chan struct{})}
}

// ObserveTransit makes the matcher tell fn, for each reply it reads, the
// time from the reply's record timestamp to now: the reply's way from its
// producer to this process. Call it before Run; it returns r.
func (r *Replies[T]) ObserveTransit(fn func(time.Duration)) *Replies[T] {
	r.transit = fn
	return r
}

// Run reads the reply topic from its end offsets as of the call until ctx is
// done. Ready is closed once it is positioned: replies to requests made after
// that are seen.
func (r *Replies[T]) Run(ctx context.Context, c *Cluster) error {
	ends, err := c.Admin().ListEndOffsets(ctx, r.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("replies: end offsets of %s: %w", r.topic, err)
	}
	start := map[string]map[int32]kgo.Offset{r.topic: {}}
	ends.Each(func(o kadm.ListedOffset) { start[r.topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	close(r.ready)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	expired := make(chan struct{})
	go func() {
		defer close(expired)
		ticker := time.NewTicker(r.keep)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				r.expire()
			}
		}
	}()
	defer func() { cancel(); <-expired }()
	return RunLoop(ctx, LoopConfig{Name: "replies-" + r.topic, Cluster: c, Partitions: start, Logger: r.log,
		ClientOptions: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
		BatchHandler: func(_ context.Context, b *Batch) error {
			for _, rec := range b.Records {
				v, id, err := r.decode(rec.Value)
				if err != nil {
					b.Dead(rec, fmt.Sprintf("undecodable reply: %v", err))
					continue
				}
				if r.transit != nil {
					r.transit(time.Since(rec.Timestamp))
				}
				r.deliver(id, v)
			}
			return nil
		}})
}

// Deliver hands the matcher the reply v to request id from within the
// process (its producer runs here and has had it acknowledged): the
// waiter, if any, is answered without the reply's way through the broker.
// The copy read from the topic later is kept as an unclaimed reply, as
// replies to other producers are.
func (r *Replies[T]) Deliver(id RequestID, v T) { r.deliver(id, v) }

// Ready is closed when Run has joined the topic.
func (r *Replies[T]) Ready() <-chan struct{} { return r.ready }

func (r *Replies[T]) deliver(id RequestID, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.waiters[id]; ok {
		ch <- v
		delete(r.waiters, id)
		return
	}
	// Most replies answer other producers and nobody takes them. When the
	// bound is reached the oldest go, not this one: a waiter that has not
	// registered yet is waiting for a reply that has just come.
	limit := r.earlyLimit
	if limit <= 0 {
		limit = maxEarly
	}
	for len(r.arrivals) >= limit {
		r.dropOldest()
	}
	r.seq++
	r.early[id] = early[T]{v: v, at: time.Now(), seq: r.seq}
	r.arrivals = append(r.arrivals, arrival{id: id, seq: r.seq})
}

// maxEarly bounds the replies kept for waiters that have not registered yet.
const maxEarly = 1 << 18

// dropOldest forgets the oldest arrival, and its reply if still kept.
func (r *Replies[T]) dropOldest() {
	a := r.arrivals[0]
	r.arrivals[0] = arrival{}
	r.arrivals = r.arrivals[1:]
	if e, ok := r.early[a.id]; ok && e.seq == a.seq {
		delete(r.early, a.id)
	}
	if len(r.arrivals) == 0 {
		r.arrivals = nil // let the emptied array go
	}
}

// expire forgets the replies kept for longer than keep: the oldest first,
// so it stops at the first one kept.
func (r *Replies[T]) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := time.Now().Add(-r.keep)
	for len(r.arrivals) > 0 {
		a := r.arrivals[0]
		if e, ok := r.early[a.id]; ok && e.seq == a.seq && !e.at.Before(cut) {
			return
		}
		r.dropOldest()
	}
}

func (r *Replies[T]) maxWaiters() int {
	if r.limit > 0 {
		return r.limit
	}
	return MaxWaiters
}

// Wait returns the reply to request id, or ErrNoReply when ctx ends first.
func (r *Replies[T]) Wait(ctx context.Context, id RequestID) (T, error) {
	r.mu.Lock()
	if e, ok := r.early[id]; ok {
		delete(r.early, id)
		r.mu.Unlock()
		return e.v, nil
	}
	if len(r.waiters) >= r.maxWaiters() {
		r.mu.Unlock()
		var zero T
		return zero, fmt.Errorf("%w (%d)", ErrBusy, r.maxWaiters())
	}
	ch := make(chan T, 1)
	r.waiters[id] = ch
	r.mu.Unlock()
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		r.mu.Lock()
		delete(r.waiters, id)
		r.mu.Unlock()
		select {
		case v := <-ch: // delivered while we gave up
			return v, nil
		default:
		}
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrNoReply, ctx.Err())
	}
}
