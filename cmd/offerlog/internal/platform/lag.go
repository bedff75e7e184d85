package platform

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/streams/component"
)

// LagInterval is how often the consumer lag of offerlog's groups is
// computed for /metrics.
const LagInterval = 5 * time.Second

// lagHistory is how far back the end offsets of a partition are kept to
// tell how old the oldest unconsumed record is; a group further behind
// reports at least this.
const lagHistory = time.Hour

// Lag metrics, named as kminion names them (the Kafka world's exporter), so
// that its dashboards and rules read offerlog's figures.
const (
	metricPartitionLag        = "offerlog_kafka_consumer_group_topic_partition_lag"
	metricTopicLag            = "offerlog_kafka_consumer_group_topic_lag"
	metricPartitionLagSeconds = "offerlog_kafka_consumer_group_topic_partition_lag_seconds"
	metricTopicLagSeconds     = "offerlog_kafka_consumer_group_topic_lag_seconds"
)

// lagGroups lists offerlog's consumer groups for the stages given, from
// the components' specs (package component): what the lag component
// watches and what a stopped process leaves.
func lagGroups(stages []string) []string {
	return component.GroupsOf(Specs(), component.Instances{Stages: stages})
}

func startLag(ctx context.Context, p *process) error {
	w := newLagWatcher(p.reg, p.adm, lagGroups(p.cfg.Stages.Names()))
	p.sup.Go(ctx, ComponentLag, false, w.run)
	return nil
}

// lagWatcher computes the consumer lag of offerlog's groups in the
// background, every LagInterval, and serves the last figures on /metrics:
// records and seconds behind, per group, topic and partition, and per
// group and topic. Computing it at every scrape cost a few milliseconds per
// scrape, and concurrent scrapes raced inside franz-go's group describe.
type lagWatcher struct {
	adm    *kadm.Client
	groups []string
	now    func() time.Time

	mu   sync.Mutex
	ends map[topicPartition][]endSample
	last map[string][]metrics.Sample
}

type topicPartition struct {
	topic     string
	partition int32
}

// endSample is a partition's end offset seen at a time.
type endSample struct {
	at  time.Time
	end int64
}

func newLagWatcher(reg *metrics.Registry, adm *kadm.Client, groups []string) *lagWatcher {
	w := &lagWatcher{adm: adm, groups: groups, now: time.Now, ends: map[topicPartition][]endSample{}, last: map[string][]metrics.Sample{}}
	partition := []string{"group_id", "topic_name", "partition_id"}
	topic := []string{"group_id", "topic_name"}
	reg.GaugeFunc(metricPartitionLag, "Records a consumer group has not consumed yet, per partition (computed every 5 s by the lag component).",
		partition, w.family(metricPartitionLag))
	reg.GaugeFunc(metricTopicLag, "Records a consumer group has not consumed yet, summed over a topic's partitions.",
		topic, w.family(metricTopicLag))
	reg.GaugeFunc(metricPartitionLagSeconds, "Age of the oldest record a consumer group has not consumed yet, per partition (0 when caught up; "+
		"from the partition's end offsets seen over the last hour, so at most about an hour).", partition, w.family(metricPartitionLagSeconds))
	reg.GaugeFunc(metricTopicLagSeconds, "Age of the oldest record a consumer group has not consumed yet in a topic (the largest of its partitions').",
		topic, w.family(metricTopicLagSeconds))
	return w
}

func (w *lagWatcher) family(name string) func() []metrics.Sample {
	return func() []metrics.Sample {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.last[name]
	}
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
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var rows []lagRow
	seen := map[topicPartition]bool{}
	for _, g := range w.groups {
		l, ok := lags[g]
		if !ok || l.Error() != nil {
			continue
		}
		for _, ml := range l.Lag.Sorted() {
			if ml.Err != nil || ml.Lag < 0 {
				continue
			}
			tp := topicPartition{ml.Topic, ml.Partition}
			if !seen[tp] {
				seen[tp] = true
				w.ends[tp] = recordEnd(w.ends[tp], endSample{now, ml.End.Offset}, now.Add(-lagHistory))
			}
			// The first record not consumed: kadm counts a partition the
			// group never committed from its start, not from -1.
			next := ml.End.Offset - ml.Lag
			rows = append(rows, lagRow{group: g, tp: tp, records: ml.Lag, seconds: lagSeconds(w.ends[tp], next, now)})
		}
	}
	w.last = lagFamilies(rows)
}

// lagRow is one group's lag on one partition.
type lagRow struct {
	group   string
	tp      topicPartition
	records int64
	seconds float64
}

// lagFamilies turns rows into the four families' samples.
func lagFamilies(rows []lagRow) map[string][]metrics.Sample {
	out := map[string][]metrics.Sample{}
	type gt struct{ group, topic string }
	var order []gt
	records, seconds := map[gt]int64{}, map[gt]float64{}
	for _, r := range rows {
		p := []string{r.group, r.tp.topic, strconv.Itoa(int(r.tp.partition))}
		out[metricPartitionLag] = append(out[metricPartitionLag], metrics.Sample{Labels: p, Value: float64(r.records)})
		out[metricPartitionLagSeconds] = append(out[metricPartitionLagSeconds], metrics.Sample{Labels: p, Value: r.seconds})
		k := gt{r.group, r.tp.topic}
		if _, ok := records[k]; !ok {
			order = append(order, k)
		}
		records[k] += r.records
		seconds[k] = max(seconds[k], r.seconds)
	}
	for _, k := range order {
		t := []string{k.group, k.topic}
		out[metricTopicLag] = append(out[metricTopicLag], metrics.Sample{Labels: t, Value: float64(records[k])})
		out[metricTopicLagSeconds] = append(out[metricTopicLagSeconds], metrics.Sample{Labels: t, Value: seconds[k]})
	}
	return out
}

// recordEnd appends s to a partition's history when its end moved (the
// first sample of an end offset is when it was first seen) and drops what
// is older than since, keeping the newest sample before it (the lower
// bound of older records' times).
func recordEnd(h []endSample, s endSample, since time.Time) []endSample {
	if n := len(h); n == 0 || h[n-1].end != s.end {
		h = append(h, s)
	}
	i := 0
	for i+1 < len(h) && h[i+1].at.Before(since) {
		i++
	}
	return slices.Delete(h, 0, i)
}

// lagSeconds tells how old the record at offset commit (the first one not
// consumed) is from a partition's history of end offsets: it was written
// after the last sample whose end was at most commit, and by the first
// whose end is past it; the age is interpolated between the two. A record
// older than the history is as old as its oldest sample; a caught-up group
// is 0 behind.
func lagSeconds(h []endSample, commit int64, now time.Time) float64 {
	if len(h) == 0 || commit >= h[len(h)-1].end || commit < 0 {
		return 0
	}
	i, _ := slices.BinarySearchFunc(h, commit, func(s endSample, c int64) int {
		if s.end <= c {
			return -1
		}
		return 1
	})
	// h[i] is the first sample whose end is past commit.
	if i == 0 {
		return now.Sub(h[0].at).Seconds()
	}
	before, after := h[i-1], h[i]
	share := float64(commit-before.end) / float64(after.end-before.end)
	written := before.at.Add(time.Duration(share * float64(after.at.Sub(before.at))))
	return max(now.Sub(written).Seconds(), 0)
}
