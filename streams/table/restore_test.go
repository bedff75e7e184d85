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
// one partition holding n records: keys written several times, some
// deleted (tombstones), and applied marks in the headers of some. It
// returns the cluster.
func restoreBroker(t testing.TB, n int) *streams.Cluster {
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
	if _, err := kafka.Admin().CreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "restore-table"); err != nil {
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
		r := &kgo.Record{Topic: "restore-table", Key: fmt.Appendf(nil, "k%04d", (i*37)%(n/3)), Value: fmt.Appendf(nil, "v%d", i)}
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
	ends, err := g.adm.ListEndOffsets(ctx, g.Table)
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

// TestARestoreAsSortedTablesIsTheRestoreKeyByKey: a partition restored as
// ingested sorted tables (several, the chunks small) holds exactly what the
// restore key by key holds: each key's last value, no deleted key, the
// offset reached and the input marks (in the store too).
func TestARestoreAsSortedTablesIsTheRestoreKeyByKey(t *testing.T) {
	kafka := restoreBroker(t, 3000)
	byKey, st1 := restored(t, kafka, func(g *Group) { g.ingestAt = 1 << 40 })
	ingested, st2 := restored(t, kafka, func(g *Group) { g.ingestAt, g.ingestChunk = 1, 4<<10 })
	if len(byKey) < 900 {
		t.Fatalf("the restore key by key holds %d keys: the test shows little", len(byKey))
	}
	if len(ingested) != len(byKey) {
		t.Errorf("ingested %d keys, key by key %d", len(ingested), len(byKey))
	}
	for k, v := range byKey {
		if ingested[k] != v {
			t.Errorf("%s: ingested %q, key by key %q", k, ingested[k], v)
		}
	}
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
// memtables and as ingested sorted tables (docs/BENCHMARKS.md, issue 49).
func BenchmarkRestore(b *testing.B) {
	const n = 1_000_000
	kafka := restoreBroker(b, 0)
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
	}
}
