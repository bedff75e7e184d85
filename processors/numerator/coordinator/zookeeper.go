package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/offerlog/offerlog/internal/zkconn"
)

// ZooKeeper is a Coordinator kept in a ZooKeeper ensemble under one root
// node: root/lock holds the lock (JSON; an ephemeral node of the holder's
// session, so a master that dies frees it once its session expires, and its
// timeout bounds one that hangs), root/tickets the last ticket
// granted, root/state the state pointer (JSON). Every change is one atomic
// multi-operation guarded by node versions, so concurrent masters in any
// number of processes see one lock and one pointer.
//
// Lock timeouts are judged with the clock of the process that asks (Now),
// against the time the lock was taken by the clock of its taker: keep the
// masters' clocks in sync (NTP) and timeouts much longer than their skew.
type ZooKeeper struct {
	conn *zk.Conn
	root string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

var _ Coordinator = (*ZooKeeper)(nil)

// DialZooKeeper connects to the ensemble servers ("host:port,...") and
// returns a coordinator under root, creating its nodes if missing, with a
// session of the given timeout (0: 10 s; a dead master's lock is free
// that long after its death).
func DialZooKeeper(ctx context.Context, servers, root string, session time.Duration, log *slog.Logger) (*ZooKeeper, error) {
	if log == nil {
		log = slog.Default()
	}
	if session <= 0 {
		session = 10 * time.Second
	}
	conn, events, err := zkconn.Dial(ctx, servers, session, log)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	go func() {
		for ev := range events {
			log.Debug("zookeeper session event", "state", ev.State.String(), "err", ev.Err)
		}
	}()
	c := &ZooKeeper{conn: conn, root: path.Clean("/" + root)}
	if err := c.init(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the session.
func (c *ZooKeeper) Close() { c.conn.Close() }

func (c *ZooKeeper) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *ZooKeeper) lockPath() string    { return c.root + "/lock" }
func (c *ZooKeeper) ticketsPath() string { return c.root + "/tickets" }
func (c *ZooKeeper) statePath() string   { return c.root + "/state" }

func (c *ZooKeeper) init(ctx context.Context) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(c.root, "/"), "/") {
		p += "/" + part
		if err := c.create(ctx, p, nil); err != nil {
			return err
		}
	}
	return c.create(ctx, c.ticketsPath(), []byte("0"))
}

func (c *ZooKeeper) create(ctx context.Context, p string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := c.conn.Create(p, data, 0, zkconn.ACL())
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("coordinator: create %s: %w", p, err)
	}
	return nil
}

// contended reports errors that mean another master changed a node between
// our read and our write: read again and retry.
func contended(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode)
}

func (c *ZooKeeper) readLock() (*Lock, *zk.Stat, error) {
	data, stat, err := c.conn.Get(c.lockPath())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("coordinator: read lock: %w", err)
	}
	var l Lock
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, nil, fmt.Errorf("coordinator: lock node holds %q: %w", data, err)
	}
	return &l, stat, nil
}

// Acquire implements Coordinator.
func (c *ZooKeeper) Acquire(ctx context.Context, holder string, timeout time.Duration) (Lock, error) {
	return bounded(ctx, "take the write lock", func() (Lock, error) { return c.acquire(ctx, holder, timeout) })
}

func (c *ZooKeeper) acquire(ctx context.Context, holder string, timeout time.Duration) (Lock, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Lock{}, err
		}
		cur, stat, err := c.readLock()
		if err != nil {
			return Lock{}, err
		}
		var ops []any
		if cur != nil {
			if !cur.Expired(c.now()) && cur.Holder != holder {
				return Lock{}, fmt.Errorf("%w by %s (ticket %d) since %s", ErrLocked, cur.Holder, cur.Ticket, cur.TakenAt.Format(time.RFC3339))
			}
			ops = append(ops, &zk.DeleteRequest{Path: c.lockPath(), Version: stat.Version})
		}
		tdata, tstat, err := c.conn.Get(c.ticketsPath())
		if err != nil {
			return Lock{}, fmt.Errorf("coordinator: read tickets: %w", err)
		}
		last, err := strconv.ParseInt(string(tdata), 10, 64)
		if err != nil {
			return Lock{}, fmt.Errorf("coordinator: tickets node holds %q", tdata)
		}
		l := Lock{Holder: holder, Ticket: last + 1, TakenAt: c.now().UTC(), Timeout: timeout}
		data, _ := json.Marshal(l)
		ops = append(ops,
			&zk.SetDataRequest{Path: c.ticketsPath(), Data: []byte(strconv.FormatInt(l.Ticket, 10)), Version: tstat.Version},
			// Ephemeral: the lock of a master that died goes with its
			// session, after the session timeout, not after the lock's.
			&zk.CreateRequest{Path: c.lockPath(), Data: data, Acl: zkconn.ACL(), Flags: zk.FlagEphemeral})
		_, err = c.conn.Multi(ops...)
		switch {
		case err == nil:
			return l, nil
		case contended(err):
			continue
		default:
			return Lock{}, fmt.Errorf("coordinator: acquire: %w", err)
		}
	}
}

// Report implements Coordinator.
func (c *ZooKeeper) Report(ctx context.Context, ticket int64, p *Pointer) error {
	_, err := bounded(ctx, "report the build", func() (struct{}, error) { return struct{}{}, c.report(ctx, ticket, p) })
	return err
}

func (c *ZooKeeper) report(ctx context.Context, ticket int64, p *Pointer) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur, stat, err := c.readLock()
		if err != nil {
			return err
		}
		if cur == nil || cur.Ticket != ticket {
			return fmt.Errorf("%w: %d", ErrStaleTicket, ticket)
		}
		if cur.Expired(c.now()) {
			err := c.conn.Delete(c.lockPath(), stat.Version)
			if err != nil && !contended(err) {
				return fmt.Errorf("coordinator: release a timed-out lock: %w", err)
			}
			return fmt.Errorf("%w: ticket %d of %s, taken %s for %s", ErrTimedOut, ticket, cur.Holder, cur.TakenAt.Format(time.RFC3339), cur.Timeout)
		}
		ops := []any{&zk.DeleteRequest{Path: c.lockPath(), Version: stat.Version}}
		if p != nil {
			st := *p
			st.Holder, st.Ticket, st.ReportedAt = cur.Holder, cur.Ticket, c.now().UTC()
			data, err := json.Marshal(st)
			if err != nil {
				return err
			}
			_, sstat, err := c.conn.Get(c.statePath())
			switch {
			case errors.Is(err, zk.ErrNoNode):
				ops = append(ops, &zk.CreateRequest{Path: c.statePath(), Data: data, Acl: zkconn.ACL()})
			case err != nil:
				return fmt.Errorf("coordinator: read state: %w", err)
			default:
				ops = append(ops, &zk.SetDataRequest{Path: c.statePath(), Data: data, Version: sstat.Version})
			}
		}
		_, err = c.conn.Multi(ops...)
		switch {
		case err == nil:
			return nil
		case contended(err):
			continue
		default:
			return fmt.Errorf("coordinator: report: %w", err)
		}
	}
}

// State implements Coordinator.
func (c *ZooKeeper) State(ctx context.Context) (Pointer, bool, error) {
	if err := ctx.Err(); err != nil {
		return Pointer{}, false, err
	}
	data, err := bounded(ctx, "read the state pointer", func() ([]byte, error) {
		data, _, err := c.conn.Get(c.statePath())
		return data, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return Pointer{}, false, nil
	}
	if err != nil {
		return Pointer{}, false, fmt.Errorf("coordinator: read state: %w", err)
	}
	var p Pointer
	if err := json.Unmarshal(data, &p); err != nil {
		return Pointer{}, false, fmt.Errorf("coordinator: state node holds %q: %w", data, err)
	}
	return p, true, nil
}

// DurableTickets implements Coordinator: the tickets node outlives every
// process.
func (c *ZooKeeper) DurableTickets() bool { return true }

// Current implements Coordinator.
func (c *ZooKeeper) Current(ctx context.Context) (Lock, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lock{}, false, err
	}
	l, err := bounded(ctx, "read the write lock", func() (*Lock, error) {
		l, _, err := c.readLock()
		return l, err
	})
	if err != nil || l == nil || l.Expired(c.now()) {
		return Lock{}, false, err
	}
	return *l, true, nil
}

// bounded runs fn and returns its result, or an error saying what waited
// when ctx ends first: go-zookeeper's calls take no context, and a session
// that is reconnecting (a master paused, a server away) holds them until
// it is back. fn's goroutine ends with fn, at the latest when the
// connection is closed (Close fails every request in flight).
func bounded[T any](ctx context.Context, what string, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("coordinator: %s: no answer from ZooKeeper: %w", what, ctx.Err())
	}
}
