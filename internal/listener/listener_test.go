package listener

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve serves h with l on a free port until the test ends.
func serve(t *testing.T, l Limits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.HTTPServer(h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l.HTTPListener(ln)) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Write(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSlowBodyIsCutOff(t *testing.T) {
	if DefaultLimits.ReadTimeout > 30*time.Second {
		t.Fatalf("default read timeout %v, the contract is at most 30 s", DefaultLimits.ReadTimeout)
	}
	addr := serve(t, Limits{ReadTimeout: 500 * time.Millisecond}, http.HandlerFunc(echo))
	c := dial(t, addr)
	io.WriteString(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n")
	// A byte at a time, slower than the timeout allows for the whole body:
	// the server must close the connection, whatever it answers.
	start := time.Now()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte("x")); err != nil {
			break
		}
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 512)
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // nothing yet: send another byte
			}
			break // closed (EOF or reset), or answered and closed
		}
	}
	if time.Now().After(deadline) {
		t.Fatal("a slow body was not cut off")
	}
	t.Logf("cut off after %v", time.Since(start).Round(10*time.Millisecond))
}
