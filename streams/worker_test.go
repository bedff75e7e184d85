package streams

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// polled returns a polled batch of n records, at offsets from first on.
func polled(first int64, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Offset: first + int64(i)}
	}
	return recs
}

func offsets(recs []*kgo.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

// A worker busy with a batch finds the polls that came meanwhile waiting,
// and takes them as one batch (their records share one commit), in order
// and up to its bound: the batch that would cross it is the next one's
// start.
func TestAWorkerTakesWhatWaitsAsOneBatch(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := &worker{tp: tp{"in", 0}, cl: cl, queue: make(chan []*kgo.Record, 2), wake: make(chan struct{}, 1)}
	ctx := context.Background()

	first := polled(0, 3)
	w.push(first)
	if paused := w.push(polled(3, 4)); !paused {
		t.Fatal("a poll that filled the queue did not pause the partition")
	}
	w.push(polled(7, 5))  // fetched before the pause: the backlog
	w.push(polled(12, 2)) // the backlog's second
	got, ok := w.next(ctx, 8)
	if !ok || !slices.Equal(offsets(got), []int64{0, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("first batch: %v, want offsets 0-6 (the next poll of 5 would cross 8)", offsets(got))
	}
	if len(first) != 3 || cap(first) < 3 {
		t.Fatalf("the first poll's slice was changed: %v", offsets(first))
	}
	got, _ = w.next(ctx, 8)
	if !slices.Equal(offsets(got), []int64{7, 8, 9, 10, 11, 12, 13}) {
		t.Fatalf("second batch: %v, want offsets 7-13", offsets(got))
	}
	w.resumeIfRoomy()
	if w.paused {
		t.Fatal("the partition stayed paused with nothing waiting")
	}

	// A poll larger than the bound is taken whole, alone.
	w.push(polled(14, 10))
	w.push(polled(24, 1))
	got, _ = w.next(ctx, 8)
	if !slices.Equal(offsets(got), offsets(polled(14, 10))) {
		t.Fatalf("a poll over the bound: %v, want it whole and alone", offsets(got))
	}
	got, _ = w.next(ctx, 8)
	if !slices.Equal(offsets(got), []int64{24}) {
		t.Fatalf("after it: %v, want [24]", offsets(got))
	}

	// A poll from further back (the client's position reset) is not
	// merged behind later records: it starts the next batch.
	w.push(polled(25, 3))
	w.push(polled(20, 3))
	got, _ = w.next(ctx, 8)
	if !slices.Equal(offsets(got), []int64{25, 26, 27}) {
		t.Fatalf("before a poll read again: %v, want 25-27 alone", offsets(got))
	}
	got, _ = w.next(ctx, 8)
	if !slices.Equal(offsets(got), []int64{20, 21, 22}) {
		t.Fatalf("the poll read again: %v, want 20-22", offsets(got))
	}

	// Nothing waiting: next waits for the next poll, or ctx.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := w.next(done, 8); ok {
		t.Fatal("next returned a batch with nothing waiting")
	}
}
