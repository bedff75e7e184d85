package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Local is a Coordinator in process memory, for one process. Safe for
// concurrent use.
type Local struct {
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu      sync.Mutex
	lock    *Lock
	tickets int64
	state   *Pointer
}

var _ Coordinator = (*Local)(nil)

func (c *Local) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Acquire implements Coordinator.
func (c *Local) Acquire(_ context.Context, holder string, timeout time.Duration) (Lock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.lock != nil && !c.lock.Expired(now) && c.lock.Holder != holder {
		return Lock{}, fmt.Errorf("%w by %s (ticket %d) since %s", ErrLocked, c.lock.Holder, c.lock.Ticket, c.lock.TakenAt.Format(time.RFC3339))
	}
	c.tickets++
	c.lock = &Lock{Holder: holder, Ticket: c.tickets, TakenAt: now, Timeout: timeout}
	return *c.lock, nil
}

// Report implements Coordinator.
func (c *Local) Report(_ context.Context, ticket int64, p *Pointer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil || c.lock.Ticket != ticket {
		return fmt.Errorf("%w: %d", ErrStaleTicket, ticket)
	}
	l := *c.lock
	c.lock = nil
	if l.Expired(c.now()) {
		return fmt.Errorf("%w: ticket %d of %s, taken %s for %s", ErrTimedOut, ticket, l.Holder, l.TakenAt.Format(time.RFC3339), l.Timeout)
	}
	if p != nil {
		st := *p
		st.Holder, st.Ticket, st.ReportedAt = l.Holder, l.Ticket, c.now()
		c.state = &st
	}
	return nil
}

// State implements Coordinator.
func (c *Local) State(context.Context) (Pointer, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return Pointer{}, false, nil
	}
	return *c.state, true, nil
}

// DurableTickets implements Coordinator: a Local's tickets start again with
// its process.
func (c *Local) DurableTickets() bool { return false }

// Current implements Coordinator.
func (c *Local) Current(context.Context) (Lock, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil || c.lock.Expired(c.now()) {
		return Lock{}, false, nil
	}
	return *c.lock, true, nil
}
