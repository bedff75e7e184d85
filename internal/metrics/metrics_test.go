package metrics

import (
	"strings"
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
