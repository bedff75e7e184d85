package table

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/streams"
)

// restoreBroker is an embedded broker with a changelog "restore-table" of
// parts partitions holding n records: keys written several times, some
// deleted (tombstones), each key in one partition, and applied marks in
// the headers of some. It returns the cluster.
func restoreBroker(t testing.TB, n int, parts int32) *streams.Cluster {
	t.Helper()
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	kafka, err := streams.NewCluster(b.Addrs(), nil, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kafka.Admin().CreateTopics(ctx, parts, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "restore-table"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if n == 0 {
		return kafka
	}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		k := (i * 37) % (n / 3)
		r := &kgo.Record{Topic: "restore-table", Partition: int32(k) % parts, Key: fmt.Appendf(nil, "k%04d", k), Value: fmt.Appendf(nil, "v%d", i)}
		if i%11 == 0 {
			r.Value = nil // a deletion, perhaps set again later
		}
		if i%500 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: appliedHeader, Value: fmt.Appendf(nil, "in/0/%d", i)}}
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return kafka
}

// restore restores the changelog into an empty store of a group
// configured by configure, and returns the store.
func restore(t testing.TB, kafka *streams.Cluster, configure func(*Group)) *tableStore {
	t.Helper()
	g := &Group{Streams: Config{Cluster: kafka, StateDir: t.TempDir(), Logger: slog.Default()}, Name: "restore", Table: "restore-table",
		Inputs: []string{"in"}, Logger: slog.Default(), stores: map[int32]*tableStore{}}
	g.adm = kafka.Admin()
	configure(g)
	st, err := g.store(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ends, err := g.adm.ListEndOffsets(ctx, string(g.Table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.follow(ctx, 0, st, ends, "restored"); err != nil {
		t.Fatal(err)
	}
	return st
}

// restored is restore, and what the store holds then.
func restored(t testing.TB, kafka *streams.Cluster, configure func(*Group)) (map[string]string, *tableStore) {
	t.Helper()
	st := restore(t, kafka, configure)
	out := map[string]string{}
	it, err := st.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out, st
}

// running runs v until the function it returns is called, once v is
// Ready.
func running(tb testing.TB, v *View) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	select {
	case <-v.Ready():
	case err := <-done:
		cancel()
		tb.Fatalf("the view stopped before it was ready: %v", err)
	case <-time.After(5 * time.Minute):
		cancel()
		<-done
		tb.Fatal("the view is not ready after 5 minutes")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("view: %v", err)
		}
	}
}

// sameContents fails t unless ingested holds what want, the contents of
// the other way (how), holds, and want at least least keys.
func sameContents(t *testing.T, ingested, want map[string]string, least int, how string) {
	t.Helper()
	if len(want) < least {
		t.Fatalf("%s holds %d keys: the test shows little", how, len(want))
	}
	if len(ingested) != len(want) {
		t.Errorf("ingested %d keys, %s %d", len(ingested), how, len(want))
	}
	for k, v := range want {
		if ingested[k] != v {
			t.Errorf("%s: ingested %q, %s %q", k, ingested[k], how, v)
		}
	}
}

// TestARestoreAsSortedTablesIsTheRestoreKeyByKey: a partition restored as
// ingested sorted tables (several, the chunks small) holds exactly what the
// restore key by key holds: each key's last value, no deleted key, the
// offset reached and the input marks (in the store too).
func TestARestoreAsSortedTablesIsTheRestoreKeyByKey(t *testing.T) {
	kafka := restoreBroker(t, 3000, 1)
	byKey, st1 := restored(t, kafka, func(g *Group) { g.ingestAt = 1 << 40 })
	ingested, st2 := restored(t, kafka, func(g *Group) { g.ingestAt, g.ingestChunk = 1, 4<<10 })
	sameContents(t, ingested, byKey, 900, "key by key")
	if st1.offset != 2999 || st2.offset != 2999 || st2.applied["in"] != st1.applied["in"] || st1.applied["in"] != 2500 {
		t.Errorf("offsets %d and %d, marks %v and %v: want 2999 and in: 2500", st1.offset, st2.offset, st1.applied, st2.applied)
	}
	v, closer, err := st2.db.Get([]byte(offsetKey))
	if err != nil || string(v) != "2999" {
		t.Errorf("the stored offset %q %v", v, err)
	}
	if closer != nil {
		closer.Close()
	}
}

// BenchmarkRestore restores a partition of 1 000 000 records of about 600
// bytes (each key once) onto an empty store, key by key through the
// memtables and as ingested sorted tables, as a group's table and as a
// view (docs/BENCHMARKS.md, issue 49).
func BenchmarkRestore(b *testing.B) {
	const n = 1_000_000
	kafka := restoreBroker(b, 0, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := bytes.Repeat([]byte("offer "), 100)
	for i := range n {
		cl.Produce(context.Background(), &kgo.Record{Topic: "restore-table", Key: fmt.Appendf(nil, "offer-%09d", (i*7919)%n), Value: value}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		at   int64
	}{{"by key", 1 << 40}, {"as tables", 1}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(n * (len(value) + 15)))
			for b.Loop() {
				restore(b, kafka, func(g *Group) { g.ingestAt = c.at })
			}
		})
		b.Run("view "+c.name, func(b *testing.B) {
			b.SetBytes(int64(n * (len(value) + 15)))
			for b.Loop() {
				v := NewView(Config{Cluster: kafka, StateDir: b.TempDir(), Logger: slog.Default()}, "restore-table", streams.Bytes{}, "bench")
				v.ingestAt = c.at
				running(b, v)()
			}
		})
	}
}

// TestAViewRestoredAsSortedTablesIsTheViewReadByItsLoop: a view of a
// topic of three partitions onto an empty disk, read as ingested sorted
// tables (several chunks, the partitions' records interleaved in them),
// holds what a view read record by record by its loop holds, every
// partition's next offset its end; it then reads on through its loop (a
// later write and deletion), and restarted on its store it holds the
// same.
func TestAViewRestoredAsSortedTablesIsTheViewReadByItsLoop(t *testing.T) {
	const topic = "restore-table"
	kafka := restoreBroker(t, 3000, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	put := func(k int, value []byte) {
		t.Helper()
		r := &kgo.Record{Topic: topic, Partition: int32(k % 3), Key: fmt.Appendf(nil, "k%04d", k), Value: value}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	view := func(dir string, at, chunk int64) (*View, func()) {
		t.Helper()
		v := NewView(Config{Cluster: kafka, StateDir: dir, Logger: slog.Default()}, topic, streams.Bytes{}, "test")
		v.ingestAt, v.ingestChunk = at, chunk
		return v, running(t, v)
	}
	contents := func(v *View) map[string]string {
		t.Helper()
		it, err := v.Iterator()
		if err != nil {
			t.Fatal(err)
		}
		defer it.Release()
		out := map[string]string{}
		for it.Next() {
			val, err := it.Value()
			if err != nil {
				t.Fatal(err)
			}
			out[it.Key()] = string(val.([]byte))
		}
		return out
	}
	byLoop, stopLoop := view(t.TempDir(), 1<<40, 0)
	want := contents(byLoop)
	stopLoop()
	ingested, stop := view(dir, 1, 4<<10)
	got := contents(ingested)
	sameContents(t, got, want, 300, "read by the loop")
	ends, err := streams.EndOffsets(ctx, kafka.Admin(), topic)
	if err != nil {
		t.Fatal(err)
	}
	ingested.mu.RLock()
	for p, end := range ends {
		if next, _, err := storedInt(ingested.db, viewOffsetKey(p)); err != nil || next != end || ingested.pos[p] != end {
			t.Errorf("partition %d: stored next offset %d (%v), position %d, want the end %d", p, next, err, ingested.pos[p], end)
		}
	}
	ingested.mu.RUnlock()
	// Read on by the loop.
	put(1, []byte("later"))
	put(2, nil)
	later, _ := streams.EndOffsets(ctx, kafka.Admin(), topic)
	if err := ingested.WaitFor(ctx, later); err != nil {
		t.Fatal(err)
	}
	if v, err := ingested.Get("k0001"); err != nil || string(v.([]byte)) != "later" {
		t.Errorf("k0001 after a later write: %v %v", v, err)
	}
	if v, err := ingested.Get("k0002"); err != nil || v != nil {
		t.Errorf("k0002 after a deletion: %v %v", v, err)
	}
	stop()
	// Restarted on its store: the same copy, read on from its offsets.
	want["k0001"] = "later"
	delete(want, "k0002")
	again, stopAgain := view(dir, 1, 4<<10)
	defer stopAgain()
	if got := contents(again); len(got) != len(want) || got["k0001"] != "later" || got["k0003"] != want["k0003"] {
		t.Errorf("restarted: %d keys (want %d), k0001 %q", len(got), len(want), got["k0001"])
	}
}
