package listener

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

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
