package listener

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// shedListener serves at most max connections at once, as
// netutil.LimitListener does, but a new connection does not wait for an
// idle one to time out: when one more than max is open, the connection
// idle the longest (one that has sent no request yet, or kept alive
// between requests) is closed to make room. Only when every connection is
// in a request does a new one wait (in the kernel's accept queue). With
// the limit plain, 2 000 idle sockets kept a new client waiting 10 s, the
// header timeout of the idle ones ahead of it.
//
// The HTTP server tells the connections' states (HTTPServer's ConnState):
// an http.Server serving this listener without it sheds only connections
// that never made a request.
type shedListener struct {
	net.Listener
	max int

	mu     sync.Mutex
	conns  map[*shedConn]struct{}
	freed  *sync.Cond // signalled when a connection closes, or the listener
	closed bool
}

func newShedListener(ln net.Listener, max int) *shedListener {
	l := &shedListener{Listener: ln, max: max, conns: map[*shedConn]struct{}{}}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// Accept accepts a connection, then makes room for it: it closes the
// connection idle longest while more than max are open, or waits for one
// to close if none is idle.
func (l *shedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &shedConn{Conn: c, l: l, idleSince: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns[sc] = struct{}{}
	for len(l.conns) > l.max {
		if l.closed {
			delete(l.conns, sc)
			_ = c.Close()
			return nil, net.ErrClosed
		}
		victim := l.idlest(sc)
		if victim != nil && time.Since(victim.idleSince) >= shedIdle {
			delete(l.conns, victim) // its Close finds it gone
			_ = victim.Conn.Close()
			continue
		}
		// Wait for a connection to close, or the idlest to have been
		// idle shedIdle.
		var wake *time.Timer
		if victim != nil {
			wake = time.AfterFunc(shedIdle-time.Since(victim.idleSince), func() {
				l.mu.Lock()
				l.freed.Broadcast()
				l.mu.Unlock()
			})
		}
		l.freed.Wait()
		if wake != nil {
			wake.Stop()
		}
	}
	return sc, nil
}

// shedIdle is how long a connection must have been idle to be closed for
// a new one: a connection accepted a moment ago, or just done with a
// request, may have its next request on the way, not yet read.
const shedIdle = time.Second

// Close closes the listener; an Accept waiting for room returns.
func (l *shedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// idlest returns the open connection idle the longest, other than not, or
// nil if none is idle. The caller holds mu.
func (l *shedListener) idlest(not *shedConn) *shedConn {
	var v *shedConn
	for c := range l.conns {
		if c != not && !c.idleSince.IsZero() && (v == nil || c.idleSince.Before(v.idleSince)) {
			v = c
		}
	}
	return v
}

func (l *shedListener) forget(c *shedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.conns[c]; ok {
		delete(l.conns, c)
		l.freed.Signal()
	}
}

// shedConn is a connection of a shedListener. idleSince is when it became
// idle, zero while it is in a request; under the listener's mu.
type shedConn struct {
	net.Conn
	l         *shedListener
	idleSince time.Time
	once      sync.Once
}

func (c *shedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}

// NetConn returns the connection c wraps.
func (c *shedConn) NetConn() net.Conn { return c.Conn }

// setState records what the HTTP server says of the connection.
func (c *shedConn) setState(s http.ConnState) {
	switch s {
	case http.StateActive:
		c.l.mu.Lock()
		c.idleSince = time.Time{}
		c.l.mu.Unlock()
	case http.StateIdle:
		c.l.mu.Lock()
		c.idleSince = time.Now()
		c.l.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		c.once.Do(func() { c.l.forget(c) })
	}
}

// connState passes the HTTP server's word on a connection to its
// shedListener, through the connections that wrap it (TLS, the smuggling
// watch).
func connState(c net.Conn, s http.ConnState) {
	for c != nil {
		switch w := c.(type) {
		case *shedConn:
			w.setState(s)
			return
		case interface{ NetConn() net.Conn }:
			c = w.NetConn()
		default:
			return
		}
	}
}
