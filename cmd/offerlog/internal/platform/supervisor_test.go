package platform

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
)

// TestSupervisorRestartsAndReports: a failed restartable component is
// reported as restarting (readiness) and counted on /metrics, then runs
// again; shutdown waits for it.
func TestSupervisorRestartsAndReports(t *testing.T) {
	reg := metrics.New()
	sup := &supervisor{log: testkit.Logger(), restarts: reg.Counter("offerlog_component_restarts_total", "", "component")}
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int64
	release := make(chan struct{})
	sup.Go(ctx, "flaky", true, func(ctx context.Context) error {
		if runs.Add(1) == 1 {
			<-release
			return errors.New("boom")
		}
		<-ctx.Done()
		return nil
	})
	if err := sup.Restarting(); err != nil {
		t.Fatalf("restarting before any failure: %v", err)
	}
	close(release)
	testkit.Eventually(t, 10*time.Second, "reported as restarting", func() bool {
		err := sup.Restarting()
		return err != nil && strings.Contains(err.Error(), "flaky restarting after: boom")
	})
	testkit.Eventually(t, 10*time.Second, "run again", func() bool { return runs.Load() == 2 && sup.Restarting() == nil })
	var out bytes.Buffer
	reg.Write(&out)
	if !strings.Contains(out.String(), `offerlog_component_restarts_total{component="flaky"} 1`) {
		t.Fatalf("metrics:\n%s", out.String())
	}
	cancel()
	sup.Wait()
	if sup.Err() != nil {
		t.Fatalf("a restartable component failed the platform: %v", sup.Err())
	}
}
