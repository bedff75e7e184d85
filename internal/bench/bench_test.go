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
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := Run(ctx, Config{Docs: 2000, Keys: 2000, Offers: 2000, Partitions: 2, Out: &out, Logger: testkit.Logger()}); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, want := range []string{"vs copy", "vs goka", "copy ", "goka ", "pipeline ", "numerator ", "numerator/gen2 ", "cache ", "cache/franz-go-read ", "cache/gets ", "scheduler ", "scheduler/timers-load ", "scheduler/timer-lateness ", "offers ", "offers/writes ", "offers/reads ", "offers/replay ", "machine:"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if err := Run(ctx, Config{Docs: 10, Partitions: 1, Only: []string{"nosuch"}, Out: &out}); err == nil {
		t.Error("an unknown scenario ran")
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
