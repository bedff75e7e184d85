package listener

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
)

// Go's HTTP server, as RFC 9112 allows, reads a request with both
// Content-Length and Transfer-Encoding as chunked and drops the
// Content-Length, so a handler cannot tell. A proxy in front may have read
// it by its Content-Length: the two then disagree on where the next request
// starts (request smuggling). The RFC says such a message "ought to be
// handled as an error"; offerlog does, so the raw bytes are watched as they
// are read.

// watchedListener accepts watchedConns.
type watchedListener struct{ net.Listener }

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c}, nil
}

// watchedConn scans what is read from it line by line and marks itself
// when a header block (the lines up to an empty one) holds both a
// Content-Length and a Transfer-Encoding line. The scan cannot miss a real
// header block: whatever came before it, its own lines are seen whole. A
// body that looks like such a block marks the connection of the client
// that sent it, and no other.
type watchedConn struct {
	net.Conn
	smuggled atomic.Bool

	line         [len("transfer-encoding:")]byte
	n            int // bytes of the current line kept in line (capped)
	lineLen      int // length of the current line so far
	sawCL, sawTE bool
}

// NetConn returns the connection c wraps.
func (c *watchedConn) NetConn() net.Conn { return c.Conn }

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	for _, ch := range b[:n] {
		c.scan(ch)
	}
	return n, err
}

func (c *watchedConn) scan(ch byte) {
	switch ch {
	case '\n':
		if c.lineLen == 0 {
			if c.sawCL && c.sawTE {
				c.smuggled.Store(true)
			}
			c.sawCL, c.sawTE = false, false
		} else {
			c.header()
		}
		c.n, c.lineLen = 0, 0
	case '\r':
		// part of the line end
	default:
		if c.n < len(c.line) {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			c.line[c.n] = ch
			c.n++
		}
		c.lineLen++
	}
}

func (c *watchedConn) header() {
	l := string(c.line[:c.n])
	switch {
	case len(l) >= len("content-length:") && l[:len("content-length:")] == "content-length:":
		c.sawCL = true
	case l == "transfer-encoding:":
		c.sawTE = true
	}
}

type connKey struct{}

func connContext(ctx context.Context, c net.Conn) context.Context {
	if w, ok := c.(*watchedConn); ok {
		return context.WithValue(ctx, connKey{}, w)
	}
	return ctx
}

// refuseSmuggling answers 400, and closes the connection, for a request
// whose connection saw Content-Length and Transfer-Encoding in one header
// block.
func refuseSmuggling(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*watchedConn); ok && c.smuggled.Load() {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"error": "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 §6.1); the connection is closed"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
