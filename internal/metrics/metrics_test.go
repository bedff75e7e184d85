package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestTextFormat(t *testing.T) {
	r := New()
	c := r.Counter("offerlog_verdicts_total", "Verdicts.", "verdict")
	c.With("ACCEPTED").Add(3)
	c.With("STALE").Inc()
	g := r.Gauge("offerlog_up", "Up.")
	g.With().Set(1)
	h := r.Histogram("offerlog_latency_seconds", "Latency.", []float64{0.1, 1}, "op")
	h.With("post").Observe(0.05)
	h.With("post").Observe(0.5)
	r.GaugeFunc("offerlog_lag", "Lag.", []string{"group"}, func() []Sample {
		return []Sample{{Labels: []string{"registry"}, Value: 7}}
	})
	var b strings.Builder
	r.Write(&b)
	for _, want := range []string{
		`offerlog_verdicts_total{verdict="ACCEPTED"} 3`,
		`offerlog_verdicts_total{verdict="STALE"} 1`,
		"offerlog_up 1",
		`offerlog_latency_seconds_bucket{op="post",le="0.1"} 1`,
		`offerlog_latency_seconds_bucket{op="post",le="1"} 2`,
		`offerlog_latency_seconds_bucket{op="post",le="+Inf"} 2`,
		`offerlog_latency_seconds_count{op="post"} 2`,
		`offerlog_lag{group="registry"} 7`,
		"# TYPE offerlog_latency_seconds histogram",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// TestServedByClientGolang: /metrics carries the Go runtime and process
// collectors, answers OpenMetrics when asked, survives concurrent scrapes
// while values change, and lists a computed series once even if its
// function repeats it.
func TestServedByClientGolang(t *testing.T) {
	r := New()
	c := r.Counter("offerlog_things_total", "Things.", "kind")
	r.GaugeFunc("offerlog_lag", "Lag.", []string{"group"}, func() []Sample {
		return []Sample{{Labels: []string{"g"}, Value: 1}, {Labels: []string{"g"}, Value: 2}}
	})
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				c.With(fmt.Sprint(i)).Inc()
				resp, err := http.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), "go_goroutines") ||
					!strings.Contains(string(body), "process_") || strings.Count(string(body), "offerlog_lag{") != 1 {
					errs <- fmt.Errorf("scrape: %d\n%s", resp.StatusCode, body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := c.With("3").Value(); got != 20 {
		t.Fatalf("counter %d, want 20", got)
	}
	if !strings.Contains(scrape(t, srv.URL, "application/openmetrics-text"), "# EOF") {
		t.Fatal("no OpenMetrics answer")
	}
	if !strings.Contains(scrape(t, srv.URL, ""), `offerlog_lag{group="g"} 2`) {
		t.Fatal("the last sample of a repeated series is not the one served")
	}
}

func scrape(t *testing.T, url, accept string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
