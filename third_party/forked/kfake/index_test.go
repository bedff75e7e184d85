package kfake

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIndexFromHeadersIsTheCarefulOnes (offerlog patch 12): after a clean
// shutdown, a partition's index built from its batches' headers is the
// index built by decoding every batch, and a restarted cluster serves every
// record.
func TestIndexFromHeadersIsTheCarefulOnes(t *testing.T) {
	dir := t.TempDir()
	c, err := NewCluster(NumBrokers(1), DataDir(dir), SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: "t", Key: []byte(fmt.Sprint(i % 37)), Value: []byte(fmt.Sprint("value ", i))}, nil)
		if i%300 == 0 {
			if err := cl.Flush(ctx); err != nil { // several batches
				t.Fatal(err)
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	c.Close()

	c, err = NewCluster(NumBrokers(1), DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var parts int
	c.data.tps.each(func(topic string, p int32, pd *partData) {
		if topic != "t" {
			return
		}
		parts++
		pdir := partDir(dir, topic, p)
		if _, err := c.fs.Stat(filepath.Join(pdir, "snapshot.json")); err != nil {
			t.Fatalf("%s-%d: no snapshot after a clean shutdown (the headers' path not taken): %v", topic, p, err)
		}
		for i := range pd.segments {
			seg := &pd.segments[i]
			// maxEarlierTimestamp is the partition's, rebuilt after every
			// segment is loaded, either way.
			fromHeaders := append([]batchMeta(nil), seg.index...)
			for j := range fromHeaders {
				fromHeaders[j].maxEarlierTimestamp = 0
			}
			headerMax := seg.maxBatch
			headerMax.maxEarlierTimestamp = 0
			seg.index = nil
			if _, err := c.loadSegmentBatches(pd, c.fs, pdir, seg.base); err != nil {
				t.Fatal(err)
			}
			if len(fromHeaders) == 0 || !reflect.DeepEqual(fromHeaders, seg.index) || headerMax != seg.maxBatch {
				t.Fatalf("%s-%d segment %d: from headers %+v\ndecoded %+v", topic, p, seg.base, fromHeaders, seg.index)
			}
		}
	})
	if parts != 2 {
		t.Fatalf("%d partitions of t after the restart", parts)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", got, err)
		}
		got += fs.NumRecords()
	}
}
