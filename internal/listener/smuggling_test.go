package listener

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

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
