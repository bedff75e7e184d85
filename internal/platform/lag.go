package platform

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/sinks/ydbsink"
)

// LagInterval is how often the consumer lag of offerlog's groups is
// computed for /metrics.
const LagInterval = 5 * time.Second

// lagWatcher computes the consumer lag of offerlog's groups in the
// background, every LagInterval, and serves the last figures on /metrics
// (offerlog_consumer_lag, one series per group, topic and partition).
// Computing it at every scrape cost a few milliseconds per scrape, and
// concurrent scrapes raced inside franz-go's group describe.
type lagWatcher struct {
	adm    *kadm.Client
	groups []string

	mu      sync.Mutex
	samples []metrics.Sample
}

func newLagWatcher(reg *metrics.Registry, adm *kadm.Client, stages []string) *lagWatcher {
	groups := []string{string(registry.Group), indexer.Group, indexer.RetryGroup, string(numerator.Group), numerator.SealerGroup,
		string(offers.Group), offers.InboxGroup, string(drafts.Group), string(cabinet.Group), feeds.Group,
		scheduler.TimersGroup}
	for _, src := range ydbsink.SourceNames() {
		groups = append(groups, ydbsink.Group(src))
	}
	for _, s := range stages {
		groups = append(groups, scheduler.Group(s, false), scheduler.Group(s, true), scheduler.RouterGroupOf(s), scheduler.PushGroup(s))
	}
	w := &lagWatcher{adm: adm, groups: groups}
	reg.GaugeFunc("offerlog_consumer_lag", "Records not yet consumed by a group, per topic and partition (computed every 5 s).",
		[]string{"group", "topic", "partition"}, w.last)
	return w
}

func (w *lagWatcher) last() []metrics.Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples
}

// run computes the lag now and every LagInterval until ctx is done.
func (w *lagWatcher) run(ctx context.Context) error {
	t := time.NewTicker(LagInterval)
	defer t.Stop()
	for {
		w.compute(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// compute replaces the figures with the lag of every group that has one;
// a failed round keeps the last figures.
func (w *lagWatcher) compute(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, LagInterval)
	defer cancel()
	lags, err := w.adm.Lag(ctx, w.groups...)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	var out []metrics.Sample
	for _, g := range w.groups {
		l, ok := lags[g]
		if !ok || l.Error() != nil {
			continue
		}
		for _, ml := range l.Lag.Sorted() {
			labels := []string{g, ml.Topic, fmt.Sprint(ml.Partition)}
			if k := fmt.Sprint(labels); !seen[k] {
				seen[k] = true
				out = append(out, metrics.Sample{Labels: labels, Value: float64(ml.Lag)})
			}
		}
	}
	w.mu.Lock()
	w.samples = out
	w.mu.Unlock()
}
