// Package coordinator is the numerator's multi-DC coordination
// (seeds/numerator.md, "Поддержание мульти-ДЦ"): a write lock on the state
// that indexing masters take before they build a generation, with its
// holder, the time it was taken and a ticket (a fencing token), and the
// pointer to the last consistent state.
//
// A master takes the lock (Acquire), builds, and reports with its ticket
// (Report): a successful report moves the state pointer and frees the lock.
// A report with a ticket that is not the current lock's, or after the lock
// timed out, is refused and the pointer stays where it was; a lock that
// timed out is free for the next master. A refused master retries every N
// seconds (AcquireRetry).
//
// Two implementations share one contract, checked by one test suite:
// ZooKeeper, for several processes and data centres, and Local, for one
// process (offerlog dev) where a single master is certain.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Lock is the write lock on a state.
type Lock struct {
	Holder  string        `json:"holder"`
	Ticket  int64         `json:"ticket"`
	TakenAt time.Time     `json:"taken_at"`
	Timeout time.Duration `json:"timeout"`
}

// Expired reports whether the lock timed out at now.
func (l Lock) Expired(now time.Time) bool { return !now.Before(l.TakenAt.Add(l.Timeout)) }

// Pointer says where the last consistent state lives and what it is.
type Pointer struct {
	// Version is the state's T.S.V.G.
	Version string `json:"version"`
	// Cluster names the Kafka cluster holding the state, Topic the topic,
	// Offsets the end offset per partition that makes the state.
	Cluster string          `json:"cluster"`
	Topic   string          `json:"topic"`
	Offsets map[int32]int64 `json:"offsets,omitempty"`
	// Holder and Ticket of the lock it was reported under, and when.
	Holder     string    `json:"holder"`
	Ticket     int64     `json:"ticket"`
	ReportedAt time.Time `json:"reported_at"`
	// Invalidated are the states declared invalid (oldest first, at most
	// MaxInvalidated): their masters did not hand them over
	// (seeds/numerator.md: "иначе данные признаются не валидными"). Each
	// report carries them on, so a master whose own state is named learns
	// it, and builds after it take versions that data built on them
	// cannot be used with. A pointer of no cluster ("" Cluster) names no
	// state: the one it named was declared invalid and none was before.
	Invalidated []Invalidation `json:"invalidated,omitempty"`
}

// Invalidation is a state declared invalid, and why.
type Invalidation struct {
	Version string    `json:"version"`
	Cluster string    `json:"cluster"`
	Holder  string    `json:"holder"`
	Ticket  int64     `json:"ticket"`
	Why     string    `json:"why"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// MaxInvalidated bounds the invalidations a pointer carries on.
const MaxInvalidated = 16

// Invalidates reports whether p names as invalid the state of version
// built under ticket in cluster.
func (p Pointer) Invalidates(cluster, version string, ticket int64) bool {
	for _, inv := range p.Invalidated {
		if inv.Cluster == cluster && inv.Version == version && inv.Ticket == ticket {
			return true
		}
	}
	return false
}

// Invalidation returns p, a state pointer, declared invalid by by for why
// at now.
func (p Pointer) Invalidation(why, by string, now time.Time) Invalidation {
	return Invalidation{Version: p.Version, Cluster: p.Cluster, Holder: p.Holder, Ticket: p.Ticket, Why: why, By: by, At: now.UTC()}
}

// CarryOn returns the invalidations of p with more appended, the last
// MaxInvalidated, for the next report.
func (p Pointer) CarryOn(more ...Invalidation) []Invalidation {
	out := append(slices.Clone(p.Invalidated), more...)
	if len(out) > MaxInvalidated {
		out = out[len(out)-MaxInvalidated:]
	}
	return out
}

// Errors of a Coordinator.
var (
	// ErrLocked: Acquire found the lock held by a master that has not timed
	// out. Retry later.
	ErrLocked = errors.New("coordinator: the write lock is held")
	// ErrStaleTicket: Report's ticket is not the current lock's (the lock
	// was taken over after a timeout, or never granted).
	ErrStaleTicket = errors.New("coordinator: stale ticket")
	// ErrTimedOut: Report came after its lock timed out. The lock is
	// released and the state pointer was not moved.
	ErrTimedOut = errors.New("coordinator: the lock timed out")
)

// Coordinator is the lock and the state pointer. Implementations are safe
// for concurrent use by several masters, in one process or many.
type Coordinator interface {
	// Acquire grants the lock to holder for timeout with a ticket larger
	// than every ticket granted before, if the lock is free, its holder
	// timed out, or its holder is holder (a master that lost track of its
	// lock takes it over, and its old ticket is refused). It returns
	// ErrLocked (wrapped, with the holder) otherwise.
	Acquire(ctx context.Context, holder string, timeout time.Duration) (Lock, error)
	// Report ends the lock of ticket. A non-nil pointer (a successful
	// build) becomes the state pointer; nil reports a failed build. It
	// returns ErrStaleTicket or ErrTimedOut without moving the pointer.
	Report(ctx context.Context, ticket int64, p *Pointer) error
	// State returns the pointer to the last consistent state; ok is false
	// if none was ever reported.
	State(ctx context.Context) (p Pointer, ok bool, err error)
	// Current returns the lock; ok is false if it is free.
	Current(ctx context.Context) (l Lock, ok bool, err error)
	// DurableTickets reports whether tickets grow across processes and
	// restarts (ZooKeeper), rather than start again with the process
	// (Local): a master's build can then be named by its ticket.
	DurableTickets() bool
}

// AcquireRetry calls Acquire every interval until it grants the lock, ctx
// ends, or it fails with an error other than ErrLocked. Each call has wait
// to answer (0: as long as ctx): an ensemble that does not answer fails
// the call instead of holding the caller until ctx ends.
func AcquireRetry(ctx context.Context, c Coordinator, holder string, timeout, interval, wait time.Duration) (Lock, error) {
	for {
		l, err := acquireWithin(ctx, c, holder, timeout, wait)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return Lock{}, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func acquireWithin(ctx context.Context, c Coordinator, holder string, timeout, wait time.Duration) (Lock, error) {
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	return c.Acquire(ctx, holder, timeout)
}
