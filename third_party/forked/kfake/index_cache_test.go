package kfake

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEvictedIndexesAreReadAgain (offerlog patch 13): with small segments
// and a cache of 40 batches, almost every sealed segment's index is
// evicted, and the cluster still serves every record from the start,
// answers a timestamp lookup, trims by DeleteRecords and by retention,
// compacts, and does all of it again after a restart, with the indexes it
// keeps loaded within the bound.
func TestEvictedIndexesAreReadAgain(t *testing.T) {
	dir := t.TempDir()
	const cache = 40
	opts := func() []Opt {
		return []Opt{NumBrokers(1), DataDir(dir), IndexCacheBatches(cache),
			BrokerConfigs(map[string]string{"log.segment.bytes": "2048"})}
	}
	c, err := NewCluster(append(opts(), SeedTopics(1, "t"))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	mustTopic := func(name string, configs map[string]*string) {
		t.Helper()
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, name); err != nil {
			t.Fatal(err)
		}
	}
	str := func(s string) *string { return &s }
	mustTopic("c", map[string]*string{"cleanup.policy": str("compact"), "min.cleanable.dirty.ratio": str("0.01")})
	mustTopic("r", map[string]*string{"retention.ms": str(strconv.Itoa(int(time.Hour.Milliseconds())))})

	const n = 1500
	base := time.Now().Add(-10 * time.Hour).Truncate(time.Millisecond)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) } // the last a little past now + 10 h
	for i := range n {
		if i == n/2 {
			// A new leader epoch begins at n/2.
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.MoveTopicPartition("t", 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		cl.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte(fmt.Sprint("v", i)), Timestamp: at(i)}, nil)
		cl.Produce(ctx, &kgo.Record{Topic: "c", Key: []byte(fmt.Sprint("k", i%50)), Value: []byte(fmt.Sprint("v", i))}, nil)
		ts := time.Now()
		if i < n/2 {
			ts = ts.Add(-2 * time.Hour) // past r's retention
		}
		cl.Produce(ctx, &kgo.Record{Topic: "r", Value: []byte(fmt.Sprint("v", i)), Timestamp: ts}, nil)
		if i%3 == 0 || i == n/2-1 { // none of r's batches both old and new
			if err := cl.Flush(ctx); err != nil { // many batches
				t.Fatal(err)
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// What the cluster keeps of each partition: its segments, how many
	// are evicted, the batches loaded in sealed segments.
	census := func(c *Cluster) (segments, evicted, loaded int) {
		c.admin(func() {
			c.data.tps.each(func(_ string, _ int32, pd *partData) {
				for si := range pd.segments {
					segments++
					switch {
					case pd.segments[si].evicted:
						evicted++
					case si < len(pd.segments)-1:
						loaded += len(pd.segments[si].index)
					}
				}
			})
		})
		return segments, evicted, loaded
	}
	// At most the bound and the segments loaded since the last eviction:
	// a segment of 2 KiB holds at most a few dozen batches.
	const slack = 200
	check := func(c *Cluster, when string) {
		t.Helper()
		segments, evicted, loaded := census(c)
		if evicted == 0 || loaded > cache+slack {
			t.Fatalf("%s: %d segments, %d evicted, %d batches loaded in sealed ones (bound %d)", when, segments, evicted, loaded, cache)
		}
	}
	check(c, "after producing")

	consume := func(c *Cluster, topic string) []*kgo.Record {
		t.Helper()
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(4096), kgo.FetchMaxPartitionBytes(4096))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		cadm := kadm.NewClient(cons)
		ends, err := cadm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup(topic, 0)
		var got []*kgo.Record
		for len(got) == 0 || got[len(got)-1].Offset < end.Offset-1 {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("%s after %d records: %v", topic, len(got), err)
			}
			got = append(got, fs.Records()...)
		}
		return got
	}
	verify := func(c *Cluster, when string, from int) {
		t.Helper()
		got := consume(c, "t")
		if len(got) != n-from {
			t.Fatalf("%s: %d records of t from the start, want %d", when, len(got), n-from)
		}
		for j, r := range got {
			if i := from + j; r.Offset != int64(i) || string(r.Value) != fmt.Sprint("v", i) || !r.Timestamp.Equal(at(i)) {
				t.Fatalf("%s: record %d is offset %d %q at %v", when, i, r.Offset, r.Value, r.Timestamp)
			}
		}
		// A timestamp lookup lands in an evicted segment.
		listed, err := adm.ListOffsetsAfterMilli(ctx, at(from+100).UnixMilli(), "t")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := listed.Lookup("t", 0); o.Offset != int64(from+100) {
			t.Fatalf("%s: the offset after %v is %d, want %d", when, at(from+100), o.Offset, from+100)
		}
		check(c, when)
	}
	verify(c, "read from the start", 0)

	// DeleteRecords in the middle of an evicted segment.
	const cut = 333
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"t": {0: {Topic: "t", Partition: 0, At: cut}}}); err != nil {
		t.Fatal(err)
	}
	verify(c, "after DeleteRecords", cut)

	// Retention drops r's first half, compaction leaves c's last value
	// of each key.
	c.Compact()
	r := consume(c, "r")
	if len(r) != n/2 || string(r[0].Value) != fmt.Sprint("v", n/2) {
		t.Fatalf("r after retention: %d records from %q, want %d from v%d", len(r), r[0].Value, n/2, n/2)
	}
	compacted := func(c *Cluster, when string) {
		t.Helper()
		last := map[string]string{}
		for _, r := range consume(c, "c") {
			last[string(r.Key)] = string(r.Value)
		}
		for k := range 50 {
			if want := fmt.Sprint("v", n-50+k); last[fmt.Sprint("k", k)] != want {
				t.Fatalf("%s: c's k%d is %q, want %q", when, k, last[fmt.Sprint("k", k)], want)
			}
		}
	}
	compacted(c, "after compaction")
	cl.Close()
	c.Close()

	// A restart reads every index, then keeps the bound.
	c, err = NewCluster(opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	check(c, "after the restart")
	verify(c, "after the restart", cut)
	compacted(c, "after the restart")

	cl.Close()
	c.Close()

	// A restart after a crash (no snapshot: every segment replayed) reads
	// every index too, then keeps the bound.
	snapshots, err := filepath.Glob(filepath.Join(dir, "*", "*", "snapshot.json"))
	if err != nil || len(snapshots) == 0 {
		t.Fatalf("no snapshot to remove under %s: %v", dir, err)
	}
	for _, f := range snapshots {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	c, err = NewCluster(opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	check(c, "after a crash")
	// The full replay's log start is its first segment's first batch (the
	// snapshot held DeleteRecords' offset), as upstream's.
	starts, err := adm.ListStartOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	start, _ := starts.Lookup("t", 0)
	if start.Offset > cut {
		t.Fatalf("after a crash, t starts at %d, past %d", start.Offset, cut)
	}
	verify(c, "after a crash", int(start.Offset))
	compacted(c, "after a crash")

	// Epoch 0 ends where epoch 1 began: found by the segments' epochs,
	// the evicted ones before it not read.
	var req kadm.OffsetForLeaderEpochRequest
	req.Add("t", 0, 0)
	epochs, err := adm.OffsetForLeaderEpoch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e := epochs["t"][0]
	if e.Err != nil || e.LeaderEpoch != 0 || e.EndOffset != n/2 {
		t.Fatalf("epoch 0 of t: ends at %d in epoch %d (%v), want %d in 0", e.EndOffset, e.LeaderEpoch, e.Err, n/2)
	}
}

// TestSegmentsRollBySegmentMs (offerlog patch 13): a segment rolls once its
// batches' timestamps span segment.ms.
func TestSegmentsRollBySegmentMs(t *testing.T) {
	c, err := NewCluster(NumBrokers(1), SeedTopics(1, "t"), BrokerConfigs(map[string]string{"log.roll.ms": "60000"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	start := time.Now().Add(-time.Hour)
	for i := range 10 {
		// Two batches a minute apart, then one 30 s on: five segments.
		ts := start.Add(time.Duration(i/2)*time.Minute + time.Duration(i%2)*30*time.Second)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var segments int
	c.admin(func() {
		pd, _ := c.data.tps.getp("t", 0)
		segments = len(pd.segments)
	})
	if segments != 5 {
		t.Fatalf("%d segments, want 5 (a minute of timestamps each)", segments)
	}
}

// TestAFullReplayRebuildsTransactions (offerlog patch 14): a restart
// without snapshots (after a crash) rebuilds a partition's transactions
// from what it keeps of the transactional and control batches alone: a
// read_committed consumer sees the committed transaction and the plain
// records, neither the aborted one nor the one left open.
func TestAFullReplayRebuildsTransactions(t *testing.T) {
	dir := t.TempDir()
	c, err := NewCluster(NumBrokers(1), DataDir(dir), SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.TransactionalID("tx"))
	if err != nil {
		t.Fatal(err)
	}
	inTx := func(value string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("plain-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inTx("committed", kgo.TryCommit)
	inTx("aborted", kgo.TryAbort)
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("plain-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// One left open, as a crash leaves it.
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain.Close()
	c.Close()
	tx.Close()
	snapshots, _ := filepath.Glob(filepath.Join(dir, "*", "*", "snapshot.json"))
	for _, f := range snapshots {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	c, err = NewCluster(NumBrokers(1), DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if want := []string{"plain-1", "committed", "plain-2"}; !slices.Equal(got, want) {
		t.Fatalf("read committed after a full replay: %v, want %v", got, want)
	}
	// Nothing else is committed: not the aborted transaction, not the open
	// one. (Its last stable offset stays at the open transaction's start
	// after the restart, as upstream's does; not examined here.)
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if fs := cons.PollFetches(pctx); fs.NumRecords() > 0 {
		var more []string
		fs.EachRecord(func(r *kgo.Record) { more = append(more, string(r.Value)) })
		t.Fatalf("read committed after a full replay, more: %v", more)
	}
}
