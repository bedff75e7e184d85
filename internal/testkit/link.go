package testkit

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/offerlog/offerlog/streams"
)

// A Link is a network between a client and its brokers that a test cuts
// and mends, as TCP across a partition: while it is cut, what a client
// writes is taken (into its socket's buffer, as the kernel would) and sent
// once the link is mended, even if the client closed the connection
// meanwhile; what the brokers answer reaches the client only once it is
// mended, and no new connection opens. A cluster made with Over dials
// through it.
type Link struct {
	mu   sync.Mutex
	cut  bool
	mend chan struct{} // closed when the link is mended
	// held are the connections with writes taken while the link was cut.
	held map[*linkConn]struct{}
}

// NewLink returns a link that is up.
func NewLink() *Link { return &Link{mend: make(chan struct{}), held: map[*linkConn]struct{}{}} }

// Cut stops everything on the link until Mend.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		l.cut, l.mend = true, make(chan struct{})
	}
}

// Mend sends what was written while the link was cut (and closes the
// connections closed meanwhile, after it), then lets everything through.
func (l *Link) Mend() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		return
	}
	for c := range l.held {
		_, _ = c.Conn.Write(c.pending)
		c.pending = nil
		if c.closing {
			_ = c.Conn.Close()
		}
	}
	clear(l.held)
	l.cut = false
	close(l.mend)
}

// wait returns once the link is up, or done is closed (false then).
func (l *Link) wait(done <-chan struct{}) bool {
	l.mu.Lock()
	cut, mend := l.cut, l.mend
	l.mu.Unlock()
	if !cut {
		return true
	}
	select {
	case <-mend:
		return true
	case <-done:
		return false
	}
}

// Dial dials addr, and carries the connection over the link.
func (l *Link) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if !l.wait(ctx.Done()) {
		return nil, ctx.Err()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &linkConn{Conn: c, l: l, closed: make(chan struct{})}, nil
}

// Over returns a cluster of brokers whose clients connect through l.
func (l *Link) Over(t testing.TB, brokers []string) *streams.Cluster {
	t.Helper()
	c, err := streams.NewCluster(brokers, nil, streams.ClientSettings{Dial: l.Dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type linkConn struct {
	net.Conn
	l      *Link
	once   sync.Once
	closed chan struct{}
	// pending (written while the link was cut) and closing (closed
	// meanwhile) are the link's, under its mutex.
	pending []byte
	closing bool
}

func (c *linkConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	// What arrived while the link was cut is handed over once it is
	// mended (or never, if the connection is closed first).
	if n > 0 && !c.l.wait(c.closed) {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *linkConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	if c.l.cut || c.pending != nil {
		c.pending = append(c.pending, p...)
		c.l.held[c] = struct{}{}
		c.l.mu.Unlock()
		return len(p), nil
	}
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *linkConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.pending != nil {
		c.closing = true // closed by Mend, once what it holds is sent
		return nil
	}
	return c.Conn.Close()
}
