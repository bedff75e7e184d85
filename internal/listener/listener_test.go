package listener

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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

func TestSmugglingIsRefusedAndTheConnectionClosed(t *testing.T) {
	addr := serve(t, Limits{}, http.HandlerFunc(echo))
	c := dial(t, addr)
	req := "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("got %d %s, want a JSON 400", resp.StatusCode, body)
	}
	// The connection is closed: the smuggled GET gets no answer.
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the 400: %v, want EOF (connection closed)", err)
	}

	// A plain chunked request and a plain Content-Length one still pass,
	// on one kept-alive connection.
	c = dial(t, addr)
	br = bufio.NewReader(c)
	for _, req := range []string{
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\ndef",
	} {
		io.WriteString(c, req)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || len(body) != 3 {
			t.Fatalf("got %d %q for a well-framed request", resp.StatusCode, body)
		}
	}
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

func TestConnectionsAreBounded(t *testing.T) {
	release := make(chan struct{})
	addr := serve(t, Limits{MaxConns: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	var held []net.Conn
	for range 2 {
		c := dial(t, addr)
		io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
		held = append(held, c)
	}
	// A third connection is not served while two are open...
	third := dial(t, addr)
	io.WriteString(third, "GET /now HTTP/1.1\r\nHost: a\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("a third connection was served beyond MaxConns 2")
	}
	// ...and is served once one of them ends.
	close(release)
	for _, c := range held {
		c.Close()
	}
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("third connection: %d", resp.StatusCode)
	}
}

func TestWatchedConnSeesHeaderBlocksWhateverCameBefore(t *testing.T) {
	for _, c := range []struct {
		stream   string
		smuggled bool
	}{
		{"POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", false},
		{"POST / HTTP/1.1\r\ntransfer-ENCODING: chunked\r\ncontent-length: 1\r\n\r\n", true},
		// a body without a line end before the next request
		{"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		// the two in different requests
		{"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\nPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	} {
		w := &watchedConn{}
		for i := range len(c.stream) {
			w.scan(c.stream[i])
		}
		if w.smuggled.Load() != c.smuggled {
			t.Errorf("%q: smuggled %v, want %v", c.stream, w.smuggled.Load(), c.smuggled)
		}
	}
}

// TestIdleConnectionsMakeRoomForANewOne: with every connection the limit
// allows open and idle (sockets that sent nothing, and one kept alive
// after a request), a new client is served once they have been idle a
// second, not after the 10 s header timeout of the idle ones ahead of it
// (2 000 idle sockets made a /healthz wait 10 s); the idlest are closed.
func TestIdleConnectionsMakeRoomForANewOne(t *testing.T) {
	const max = 4
	addr := serve(t, Limits{MaxConns: max}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	kept := dial(t, addr)
	io.WriteString(kept, "GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(kept), nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the kept-alive connection's request: %v %v", resp, err)
	}
	var idle []net.Conn
	for range 3 * max {
		idle = append(idle, dial(t, addr))
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a new client with %d idle connections open (limit %d): %v", len(idle)+1, max, err)
	}
	resp.Body.Close()
	// The kept-alive one, idle longest, was closed.
	kept.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := kept.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the connection idle longest: %v, want it closed (EOF)", err)
	}
}
