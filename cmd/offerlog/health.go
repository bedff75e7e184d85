package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/offerlog/offerlog/streams"
)

// runHealth is the image's HEALTHCHECK: it asks the process of its
// container whether it is ready (GET /readyz on its --http, which it reads
// as the process does, from OFFERLOG_HTTP), so that the image needs no
// shell or curl. It exits 0 if ready, 1 if not, saying why.
func runHealth(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("health", stderr)
	addr := f.String("http", "127.0.0.1:8080", "the process's --http address")
	cert := f.String("tls-cert", "", "the process's --tls-cert: ask over TLS")
	ca := f.String("tls-ca", "", "PEM file the process's certificate is trusted by (default: --tls-cert itself)")
	timeout := f.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := f.parse(args); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("%w: --http %q: %v", errUsage, *addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" { // it listens everywhere: ask it here
		host = "127.0.0.1"
	}
	client := &http.Client{Timeout: *timeout}
	scheme := "http"
	if *cert != "" {
		scheme = "https"
		tc, err := streams.ClientTLS(cmp.Or(*ca, *cert))
		if err != nil {
			return err
		}
		tc.ServerName = "localhost"
		client.Transport = &http.Transport{TLSClientConfig: tc}
	}
	url := scheme + "://" + net.JoinHostPort(host, port) + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "ready: %s\n", url)
	return nil
}
