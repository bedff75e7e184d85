package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// hopBuckets reads the write-path histogram (offerlog_write_hop_seconds)
// of path from the process's /metrics at url: per hop, the cumulative
// count of observations at or under each bucket bound, and the total.
func hopBuckets(ctx context.Context, url, path string) (map[string]*dto.Histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	out := map[string]*dto.Histogram{}
	for _, m := range mfs["offerlog_write_hop_seconds"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["path"] == path {
			out[labels["hop"]] = m.GetHistogram()
		}
	}
	return out, nil
}

// slowHops says, for each hop of the writes observed between before and
// after, how many took longer than bound seconds (a bucket bound of
// metrics.LatencyBuckets): where a slow write spends its time. A
// document's hops are its append and its verdict (from the append to the
// verdict matched). Within an offer's
// answer (from the command's acknowledgement to its answer matched),
// command is a client command's time from its produce to the aggregate's
// decision (so it includes the append), and reply the answer's from the
// aggregate's emit to the matcher; the matcher reads every answer, the
// bench's and the others'. It says each hop's mean time too.
func slowHops(before, after map[string]*dto.Histogram, bound float64) string {
	// under returns h's observations and those at or under bound.
	under := func(h *dto.Histogram) (total, le uint64) {
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == bound {
				le = b.GetCumulativeCount()
			}
		}
		return h.GetSampleCount(), le
	}
	var parts, means []string
	for _, hop := range []string{"append", "command", "answer", "verdict", "reply", "view"} {
		a := after[hop]
		if a == nil {
			continue
		}
		ta, la := under(a)
		tb, lb := under(before[hop])
		n, slow := ta-tb, (ta-la)-(tb-lb)
		parts = append(parts, fmt.Sprintf("%s %d of %d", hop, slow, n))
		if n > 0 {
			mean := (a.GetSampleSum() - before[hop].GetSampleSum()) / float64(n)
			means = append(means, fmt.Sprintf("%s %.1f", hop, mean*1000))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("hops over %g ms: %s; their means (ms): %s", bound*1000, strings.Join(parts, ", "), strings.Join(means, ", "))
}

// watchHops reads path's write-path histogram at url now, and returns what
// says, from a second read, where the writes since spent their time
// (slowHops over bound seconds), or why it could not tell: a note's tail.
func watchHops(ctx context.Context, url, path string, bound float64) (since func() string) {
	before, err := hopBuckets(ctx, url, path)
	return func() string {
		if err == nil {
			var after map[string]*dto.Histogram
			if after, err = hopBuckets(ctx, url, path); err == nil {
				if s := slowHops(before, after, bound); s != "" {
					return "; " + s
				}
				return ""
			}
		}
		return fmt.Sprintf("; hops not read: %v", err)
	}
}
