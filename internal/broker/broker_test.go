package broker_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

func TestDataSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "t", Partitions: 2, Compacted: true}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b = testkit.Broker(t, dir)
	recs := testkit.ReadAll(t, b.Addrs(), "t")
	if len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("after restart: %v", recs)
	}
	st, err := topics.List(ctx, testkit.Admin(t, b.Addrs()), []topics.Topic{{Name: "t", Partitions: 2, Compacted: true}})
	if err != nil || len(st[0].Problems) != 0 {
		t.Fatalf("topic config after restart: %+v %v", st, err)
	}
}

func TestListensWhereAsked(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := b.Addrs()[0]
	if _, err := broker.Start(broker.Config{Addr: addr}); err == nil {
		t.Fatalf("a second broker started on the busy address %s", addr)
	}
}

// TestCompactionWaitsForADirtyLog: the broker compacts a partition only once
// the bytes written since its last compaction are half its log (Kafka's
// min.cleanable.dirty.ratio), so a clean log of millions of records is not
// re-read, stalling every client, at every round. Partition 1 is made dirty
// and partition 0 barely: once a round has compacted 1, it has looked at 0
// and left it.
func TestCompactionWaitsForADirtyLog(t *testing.T) {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", CompactEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "t", Partitions: 2, Compacted: true}})
	cl := testkit.Client(t, b.Addrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, time.Minute)
	put := func(p int32, key string, n int) { // one batch per record: compaction keeps the last batch
		for i := range n {
			r := &kgo.Record{Topic: "t", Partition: p, Key: []byte(key), Value: []byte(fmt.Sprint(key, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(p int32) int {
		n := 0
		for _, r := range testkit.ReadAll(t, b.Addrs(), "t") {
			if r.Partition == p {
				n++
			}
		}
		return n
	}
	// Compaction keeps a partition's last batch as it is: each step ends
	// with a record of a new key.
	for i := range 100 {
		put(0, fmt.Sprint("key-", i), 1)
	}
	put(0, "x", 2)
	put(0, "end-1", 1)
	put(1, "y", 2)
	put(1, "end-1", 1)
	b.Compact()
	if n0, n1 := count(0), count(1); n0 != 102 || n1 != 2 {
		t.Fatalf("after Compact: %d and %d records, want 102 and 2", n0, n1)
	}

	put(0, "x", 3) // 4 of 106 records dirty
	put(0, "end-2", 1)
	put(1, "y", 5) // 6 of 8
	put(1, "end-2", 1)
	testkit.Eventually(t, time.Minute, "the dirty partition compacted", func() bool { return count(1) < 8 })
	if n := count(0); n != 106 {
		t.Fatalf("partition 0 holds %d records: a log 4 %% dirty was compacted", n)
	}
	b.Compact() // asked for, every compacted partition is
	if n := count(0); n != 103 {
		t.Fatalf("partition 0 holds %d records after Compact", n)
	}
}

// TestADataDirectoryHasOneProcess: a second broker on a data directory in
// use is refused at once, naming the holder; once the first closes, it
// starts.
func TestADataDirectoryHasOneProcess(t *testing.T) {
	dir := t.TempDir()
	first, err := broker.Start(broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = broker.Start(broker.Config{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by process %d", os.Getpid())) {
		t.Fatalf("a second broker on the directory: %v", err)
	}
	first.Close()
	second, err := broker.Start(broker.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.Close()
}

// TestACompactionLeavesTheBrokerToItsClients: while a partition's
// compaction is under way (held in progress here), its clients produce to
// and read the same partition; the compaction then swaps in its segments
// keeping what was written meanwhile, and the result survives a restart.
func TestACompactionLeavesTheBrokerToItsClients(t *testing.T) {
	dir := t.TempDir()
	// The last batch (which compaction keeps as it is) is of a key of its
	// own. Small segments: the writes during the compaction roll new ones.
	h := holdCompaction(t, dir, false, func(put func(key, value string)) { put("end", "v0") })
	b, put := h.b, h.put
	// The compaction is in progress: the partition takes writes and
	// answers reads.
	for i := range 10 {
		put(fmt.Sprint("k", i), "v3")
	}
	if n := len(testkit.ReadAll(t, b.Addrs(), "t")); n != 211 {
		t.Fatalf("read %d records while the compaction was held, want 211", n)
	}
	h.letGo()

	want := map[string]string{"end": "v0"}
	for i := range 100 {
		want[fmt.Sprint("k", i)] = "v2"
	}
	for i := range 10 {
		want[fmt.Sprint("k", i)] = "v3"
	}
	check := func(b *broker.Broker) (v1 int) {
		t.Helper()
		latest := map[string]string{}
		v3 := 0
		for _, r := range testkit.ReadAll(t, b.Addrs(), "t") {
			latest[string(r.Key)] = string(r.Value)
			switch string(r.Value) {
			case "v1":
				v1++
			case "v3":
				v3++
			}
		}
		if !maps.Equal(latest, want) || v3 != 10 {
			t.Fatalf("the keys' newest values are %v with %d records of v3, want %v and 10", latest, v3, want)
		}
		return v1
	}
	testkit.Eventually(t, time.Minute, "the held compaction did not drop the superseded records", func() bool { return check(b) == 0 })
	if v1 := check(h.restart()); v1 != 0 {
		t.Fatalf("%d superseded records are back after a restart", v1)
	}
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if strings.HasSuffix(path, ".prep") || strings.HasSuffix(path, ".compact") {
			t.Errorf("a compaction's file was left: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestATrimDropsACommittedCompaction holds a compaction once its new
// segments are committed (written, and named by its marker) but not yet
// swapped in, and trims the partition meanwhile. The trim drops the
// compaction: before it is answered, the marker and the new segments are
// gone, so no load after a crash could install segments of the log as it
// was before the trim. The trimmed records stay gone across a restart,
// and the rest stay.
func TestATrimDropsACommittedCompaction(t *testing.T) {
	dir := t.TempDir()
	h := holdCompaction(t, dir, true, nil)
	b, ctx := h.b, h.ctx
	compactionFiles := func() (files []string) {
		t.Helper()
		err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
			if strings.HasSuffix(path, "compact.json") || strings.HasSuffix(path, ".compact") {
				files = append(files, filepath.Base(path))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	if files := compactionFiles(); !slices.Contains(files, "compact.json") {
		t.Fatalf("a committed compaction left no marker: %v", files)
	}
	// Offsets 0-149 go: k0-k99 of v1 and k0-k49 of v2.
	deleted, err := h.adm.DeleteRecords(ctx, kadm.Offsets{"t": {0: {Topic: "t", Partition: 0, At: 150}}})
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if files := compactionFiles(); len(files) > 0 {
		t.Fatalf("the trim was answered with the dropped compaction's files on disk: %v", files)
	}
	h.letGo()

	check := func(b *broker.Broker) {
		t.Helper()
		recs := testkit.ReadAll(t, b.Addrs(), "t")
		if len(recs) != 50 {
			t.Fatalf("read %d records after the trim, want 50", len(recs))
		}
		for i, r := range recs {
			if key := fmt.Sprint("k", 50+i); r.Offset != int64(150+i) || string(r.Key) != key || string(r.Value) != "v2" {
				t.Fatalf("record %d is %s=%s at %d, want %s=v2 at %d", i, r.Key, r.Value, r.Offset, key, 150+i)
			}
		}
	}
	check(b)
	check(h.restart())
}

// heldCompaction is a broker of a test whose compaction of topic t is
// held in progress (holdCompaction).
type heldCompaction struct {
	t   *testing.T
	dir string
	b   *broker.Broker
	ctx context.Context
	adm *kadm.Client
	// put writes a record to t and waits for its acknowledgement.
	put func(key, value string)
	// letGo lets the held compaction go on; stop also closes the broker.
	letGo, stop func()
}

// holdCompaction starts a broker on dir that compacts every 5 ms, creates
// topic t (one partition, segments of 1 KiB) and writes, while t is not
// compacted yet, 100 keys twice (v1, then v2), one batch per record, then
// what more writes, so that the first compaction has all of it. It makes
// t compacted and returns once a compaction of t is held: before it writes
// its segments, or, if committed, once it has committed them.
func holdCompaction(t *testing.T, dir string, committed bool, more func(put func(key, value string))) *heldCompaction {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var hold, released, stopped sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	hook := func(topic string, _ int32, isCommitted bool) {
		if topic == "t" && isCommitted == committed {
			hold.Do(func() { close(held); <-release })
		}
	}
	cfg := broker.WithCompactionHook(broker.Config{DataDir: dir, Addr: "127.0.0.1:0", CompactEvery: 5 * time.Millisecond, Logger: testkit.Logger()}, hook)
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldCompaction{t: t, dir: dir, b: b, ctx: testkit.Context(t, time.Minute), adm: testkit.Admin(t, b.Addrs()), letGo: letGo}
	h.stop = func() { stopped.Do(func() { letGo(); b.Close() }) }
	t.Cleanup(h.stop)
	if _, err := h.adm.CreateTopic(h.ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")}, "t"); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Client(t, b.Addrs(), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	h.put = func(key, value string) {
		t.Helper()
		if err := cl.ProduceSync(h.ctx, &kgo.Record{Topic: "t", Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"v1", "v2"} {
		for i := range 100 {
			h.put(fmt.Sprint("k", i), v)
		}
	}
	if more != nil {
		more(h.put)
	}
	if _, err := h.adm.AlterTopicConfigs(h.ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, "t"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-h.ctx.Done():
		t.Fatalf("no compaction of t was held (committed: %t)", committed)
	}
	return h
}

// restart closes the broker and starts another on its directory, which
// does not compact, and returns it.
func (h *heldCompaction) restart() *broker.Broker {
	h.t.Helper()
	h.stop()
	b, err := broker.Start(broker.Config{DataDir: h.dir, Addr: "127.0.0.1:0", CompactEvery: time.Hour, Logger: testkit.Logger()})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(b.Close)
	return b
}

// TestCompactionLeavesWhatAnOpenTransactionWouldSupersede: a record written
// in a transaction still open supersedes nothing until the transaction
// commits, as Kafka's cleaner stops at the last stable offset. Upstream
// compacted the committed value away under the open one, and when the
// transaction aborted (a table writer fenced by the partition's next
// holder) the key had no value left at all.
func TestCompactionLeavesWhatAnOpenTransactionWouldSupersede(t *testing.T) {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "t", Partitions: 1, Compacted: true}})
	ctx := testkit.Context(t, time.Minute)
	cl := testkit.Client(t, b.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	put := func(key, value string) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	put("k", "committed")
	txn := testkit.Client(t, b.Addrs(), kgo.TransactionalID("t-0"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	put("end", "1") // compaction keeps the last batch as it is
	b.Compact()
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if got := string(testkit.Table(t, b.Addrs(), "t")["k"]); got != "committed" {
		t.Fatalf("k is %q after the open transaction aborted, want its committed value", got)
	}
}
