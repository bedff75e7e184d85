package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
)

// TestHarnessReports runs every scenario on a few documents: the harness
// and the scenarios work, and the report has every figure. It checks no
// timing.
func TestHarnessReports(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	var out strings.Builder
	// A guard against a hang, not a timing: on 2 cores shared with the
	// suite's chaos tests the scenarios took 6 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := Run(ctx, Config{Docs: 2000, Keys: 2000, Offers: 2000, Burst: 3000, DevDocs: 2000, DevOffers: 200,
		WaitRate: 20, WaitFor: time.Second, Memory: 1 << 40, Partitions: 2, Out: &out, Logger: testkit.Logger()}); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, want := range []string{"vs copy", "vs goka", "copy ", "goka ", "pipeline ", "numerator ", "numerator/gen2 ", "cache ", "cache/franz-go-read ", "cache/gets ", "scheduler ", "scheduler/timers-load ", "scheduler/timer-lateness ", "burst ", "burst/probes ", "offers ", "offers/writes ", "offers/hot-writes ", "offers/hot-writes-minimal ", "offers/reads ", "offers/replay ",
		"offers/reads-trivial ", "offers/reads-cache ", "offers/healthz ", "seller ", "seller/one-key ", "scale ", "scale/2-members ", "scale/4-members ", "dev ", "dev/wait ", "dev/restart ", "machine:", "targets (issue 36", "restart to ready", "memory  "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "not run") {
		t.Errorf("a target was not judged although every scenario ran:\n%s", report)
	}
	if err := Run(ctx, Config{Docs: 10, Partitions: 1, Only: []string{"nosuch"}, Out: &out}); err == nil {
		t.Error("an unknown scenario ran")
	}
}

// TestSizeScenarioReports runs the size scenario alone, named as `offerlog
// bench size` names it, on a few thousand offers: no ceiling runs, every
// figure and the projection are printed. It checks no timing.
func TestSizeScenarioReports(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := Run(ctx, Config{SizeOffers: 3000, Memory: 1 << 40, Partitions: 2, Only: []string{"size"}, Out: &out, Logger: testkit.Logger()}); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, want := range []string{"size ", "size/restart ", "size/restore ", "size/failover ", "size/writes ", "size/reads ", "size/reads-cache ", "size/replay ",
		"bytes per offer on the broker", "offers-table ", "local store", "projected to 50 M active offers", "bytes of Go heap an offer"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, not := range []string{"running copy", "running goka", "running pipeline", "targets (issue"} {
		if strings.Contains(report, not) {
			t.Errorf("the size scenario alone ran %q:\n%s", not, report)
		}
	}
	t.Log(report)
}

// TestTargetsJudge checks the judging of the goals on made-up results: met,
// not met, and not run when a scenario is missing.
func TestTargetsJudge(t *testing.T) {
	lat := func(d ...time.Duration) []time.Duration { return d }
	results := map[string]Result{
		"goka":                      {Records: 100_000, Duration: time.Second},
		"pipeline":                  {Records: 95_000, Duration: time.Second},
		"offers/writes":             {Records: 6000, Duration: time.Second, Latencies: lat(time.Millisecond, 600*time.Millisecond)},
		"offers/hot-writes":         {Records: 5000, Duration: time.Second, Latencies: lat(time.Millisecond, 600*time.Millisecond)},
		"offers/hot-writes-minimal": {Records: 5000, Duration: time.Second, Latencies: lat(time.Millisecond, 300*time.Millisecond)},
		"offers/reads":              {Records: 30_000, Duration: time.Second, Latencies: lat(7 * time.Millisecond)},
		"offers/healthz":            {Records: 60_000, Duration: time.Second, Latencies: lat(7 * time.Millisecond)},
		"offers/reads-cache":        {Records: 25_000, Duration: time.Second, Latencies: lat(9 * time.Millisecond)},
		"offers/reads-trivial":      {Records: 60_000, Duration: time.Second, Latencies: lat(5 * time.Millisecond)},
		"burst":                     {Records: 1_000_000, Duration: 8 * time.Second, Note: "fired twice 0, never fired 0"},
		"burst/probes":              {Records: 100, Duration: time.Second, Latencies: lat(120 * time.Millisecond)},
		"dev/restart":               {Records: 1, Duration: 800 * time.Millisecond},
		"dev":                       {Records: 1, Duration: time.Second, RSS: 2 << 30},
	}
	var out strings.Builder
	reportTargets(&out, results, 3<<30, 1<<30)
	got := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		for _, tg := range targets {
			if strings.HasPrefix(line, tg.figure+"  ") {
				got[tg.figure] = line
			}
		}
		if strings.HasPrefix(line, "memory") {
			got["memory"] = line
		}
	}
	for figure, want := range map[string]string{
		"document pipeline":                          "0.95× goka (95 000 docs/s; goka 100 000/s)  met",
		"offer writes (HTTP)":                        "max 600.0 ms  NOT MET", // under 10 000/s, the max over 200 ms
		"hot offer writes (HTTP)":                    "0.83× the cold writes' rate (5 000/s), p99 1.0 ms (1.00× theirs)  met",
		"hot offer writes vs the minimal write path": "1.00× the minimal path's rate (5 000/s; it 5 000/s), p99 1.0 ms (1.00× its 1.0 ms)  met",
		"offer reads by id (HTTP)":                   "p99 7.0 ms, 1.40× the trivial server's (60 000/s, p99 5.0 ms)  met",
		"/healthz (HTTP)":                            "1.40× the trivial server's (60 000/s, p99 5.0 ms)  NOT MET", // over 1.2×
		"reads through the serving cache":            "25 000/s, p99 9.0 ms, 1.80× the trivial server's (60 000/s, p99 5.0 ms)  met",
		"timer burst":                                "1 000 000 timers in 8.00 s, exactly once; probes p99 120.0 ms  NOT MET", // the probes
		"restart to ready (offerlog dev)":            "800ms  met",
		"numerator":                                  "not run",
		"memory":                                     "2048 MiB with offerlog dev running on its loaded tables  NOT MET (the bench process's peak: 3072 MiB)",
	} {
		if !strings.HasSuffix(strings.TrimSpace(got[figure]), want) {
			t.Errorf("%s: got %q, want it to end with %q", figure, got[figure], want)
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1 000", 123456.4: "123 456", 1234567: "1 234 567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	r := Result{Latencies: []time.Duration{5, 1, 4, 2, 3}}
	if r.Percentile(50) != 3 || r.Percentile(100) != 5 || r.Percentile(0) != 1 {
		t.Fatalf("percentiles %v %v %v", r.Percentile(0), r.Percentile(50), r.Percentile(100))
	}
	if (Result{Records: 10, Duration: 2 * time.Second}).Rate() != 5 {
		t.Fatal("rate")
	}
}

// TestMediansTakeTheMiddleRun: a row with latencies is the run of its
// median p99, another the run of its median rate, and the note lists every
// run.
func TestMediansTakeTheMiddleRun(t *testing.T) {
	lat := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	runs := []map[string]Result{
		{"a": {Records: 100, Duration: time.Second}, "a/reads": {Records: 3, Duration: time.Second, Latencies: lat(9)}},
		{"a": {Records: 300, Duration: time.Second}, "a/reads": {Records: 3, Duration: time.Second, Latencies: lat(3)}},
		{"a": {Records: 200, Duration: time.Second}, "a/reads": {Records: 3, Duration: 2 * time.Second, Latencies: lat(5)}},
	}
	m := medians(runs, []string{"a", "a/reads"})
	if got := m["a"].Rate(); got != 200 {
		t.Errorf("median rate %v, want 200", got)
	}
	if got := m["a/reads"].Percentile(99); got != 5*time.Millisecond {
		t.Errorf("median p99 %v, want 5ms", got)
	}
	if n := m["a"].Note; !strings.Contains(n, "100/s") || !strings.Contains(n, "300/s") || !strings.Contains(n, "200/s") {
		t.Errorf("the note does not list every run: %q", n)
	}
}
