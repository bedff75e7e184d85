package platform

import (
	"testing"
	"time"
)

func TestLagSeconds(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var h []endSample
	// End offsets seen every 10 s: 0 at 0 s, 100 at 10 s, 100 at 20 s
	// (unchanged: not kept), 300 at 30 s.
	for _, s := range []endSample{{at(0), 0}, {at(10), 100}, {at(20), 100}, {at(30), 300}} {
		h = recordEnd(h, s, at(-3600))
	}
	if len(h) != 3 {
		t.Fatalf("history %v: an unchanged end is not a new sample", h)
	}
	now := at(40)
	// Exact values of the interpolation.
	if got := lagSeconds(h, 0, now); got != 40 {
		// Offset 0 is the first record after end 0 at 0 s, before end 100
		// at 10 s: share 0, written at 0 s, 40 s ago.
		t.Errorf("commit 0: %v s, want 40", got)
	}
	if got := lagSeconds(h, 50, now); got != 35 {
		t.Errorf("commit 50: %v s, want 35 (half-way from 0 s to 10 s)", got)
	}
	if got := lagSeconds(h, 200, now); got != 20 {
		t.Errorf("commit 200: %v s, want 20 (half-way from 10 s to 30 s)", got)
	}
	for _, c := range []int64{300, 400, -1} { // -1: no commit, nothing behind

		if got := lagSeconds(h, c, now); got != 0 {
			t.Errorf("commit %d: %v s behind, want 0 (caught up)", c, got)
		}
	}
	// Older than the history: as old as its oldest sample.
	h = recordEnd(h, endSample{at(3700), 400}, at(20))
	if h[0].end != 100 || len(h) != 3 {
		t.Fatalf("history %v: want the samples before the window dropped but the newest of them", h)
	}
	if got := lagSeconds(h, 50, at(3700)); got != 3690 {
		t.Errorf("commit older than the history: %v s, want 3690 (the oldest sample's age)", got)
	}
	if got := lagSeconds(nil, 5, now); got != 0 {
		t.Errorf("no history: %v", got)
	}
}

func TestLagFamilies(t *testing.T) {
	out := lagFamilies([]lagRow{
		{group: "g", tp: topicPartition{"t", 0}, records: 5, seconds: 2},
		{group: "g", tp: topicPartition{"t", 1}, records: 7, seconds: 9},
		{group: "h", tp: topicPartition{"t", 0}, records: 0, seconds: 0},
	})
	if n := len(out[metricPartitionLag]); n != 3 {
		t.Fatalf("partition lag: %d series, want 3", n)
	}
	topic := out[metricTopicLag]
	if len(topic) != 2 || topic[0].Value != 12 || topic[0].Labels[0] != "g" || topic[1].Value != 0 {
		t.Errorf("topic lag %v: want g/t 12 and h/t 0", topic)
	}
	if s := out[metricTopicLagSeconds]; s[0].Value != 9 {
		t.Errorf("topic lag seconds %v: want the largest partition's, 9", s)
	}
}
