package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

func TestBrokerProcess(t *testing.T) { testkit.ServeBroker(t) }

// acked is what the broker acknowledged: the newest sequence number of
// each key of the compacted topic, and every record of the plain one.
type acked struct {
	mu     sync.Mutex
	latest map[string]int
	plain  map[int32]map[int64]string
}

// TestKillDuringCompactionLosesNothing kills the broker process (SIGKILL)
// at random moments while it compacts every millisecond and producers
// write, 50 times, and checks after each restart that every record it
// acknowledged is there: on the plain topic at its offset, on the
// compacted one as its key's newest value or a newer one.
func TestKillDuringCompactionLosesNothing(t *testing.T) {
	cycles := 50
	if testing.Short() {
		cycles = 5
	}
	dir := t.TempDir()
	a := &acked{latest: map[string]int{}, plain: map[int32]map[int64]string{}}
	seq := 0
	for cycle := range cycles {
		addrs, kill := testkit.BrokerProcess(t, dir, time.Millisecond)
		if cycle == 0 {
			createTopics(t, addrs)
		}
		a.check(t, addrs)
		seq = a.produceUntil(t, addrs, seq, time.Duration(5+rand.IntN(100))*time.Millisecond, kill)
	}
	addrs, _ := testkit.BrokerProcess(t, dir, time.Millisecond)
	n, c := a.check(t, addrs)
	t.Logf("%d kills; %d acknowledged plain records and %d keys of the compacted topic checked after the last", cycles, n, c)
	if c == 0 || len(a.plain) == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

func createTopics(t *testing.T, addrs []string) {
	t.Helper()
	adm := testkit.Admin(t, addrs)
	ctx := testkit.Context(t, 30*time.Second)
	// Small segments: a compaction rewrites many files.
	_, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("16384"), "retention.ms": kadm.StringPtr("-1"),
	}, "kept")
	if err == nil {
		_, err = adm.CreateTopic(ctx, 2, 1, map[string]*string{"segment.bytes": kadm.StringPtr("65536")}, "plain")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// produceUntil writes to both topics from seq on, kills the broker after
// d and returns the next sequence number.
func (a *acked) produceUntil(t *testing.T, addrs []string, seq int, d time.Duration, kill func()) int {
	t.Helper()
	cl, err := testkit.Cluster(t, addrs).Client(kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RecordRetries(3), kgo.MaxBufferedRecords(200))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var next int
	go func() {
		defer close(done)
		s := seq
		defer func() { next = s }()
		pad := make([]byte, 100)
		for ctx.Err() == nil {
			s++
			key := fmt.Sprintf("k%04d", s%3000)
			val := append([]byte(strconv.Itoa(s)+" "), pad...)
			cl.Produce(ctx, &kgo.Record{Topic: "kept", Key: []byte(key), Value: val}, func(r *kgo.Record, err error) {
				if err == nil {
					a.mu.Lock()
					n, _ := strconv.Atoi(string(r.Value[:len(r.Value)-len(pad)-1]))
					a.latest[key] = max(a.latest[key], n)
					a.mu.Unlock()
				}
			})
			cl.Produce(ctx, &kgo.Record{Topic: "plain", Key: []byte(key), Value: []byte(strconv.Itoa(s))}, func(r *kgo.Record, err error) {
				if err == nil {
					a.mu.Lock()
					if a.plain[r.Partition] == nil {
						a.plain[r.Partition] = map[int64]string{}
					}
					a.plain[r.Partition][r.Offset] = string(r.Value)
					a.mu.Unlock()
				}
			})
		}
	}()
	time.Sleep(d) // the kill lands at a random moment of the writes: that is the point
	kill()
	cancel()
	<-done
	cl.Close()
	return next
}

// check reads both topics and compares them with what was acknowledged;
// it returns how many plain records and compacted keys it compared.
func (a *acked) check(t *testing.T, addrs []string) (int, int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	newest := map[string]int{}
	for _, r := range testkit.ReadAll(t, addrs, "kept") {
		var n int
		if _, err := fmt.Sscan(string(r.Value), &n); err != nil {
			t.Fatalf("kept %d/%d: %q: %v", r.Partition, r.Offset, r.Value, err)
		}
		newest[string(r.Key)] = max(newest[string(r.Key)], n)
	}
	for k, n := range a.latest {
		if newest[k] < n {
			t.Errorf("kept: key %s acknowledged at %d, newest after the restart %d", k, n, newest[k])
		}
	}
	got := map[int32]map[int64]string{}
	for _, r := range testkit.ReadAll(t, addrs, "plain") {
		if got[r.Partition] == nil {
			got[r.Partition] = map[int64]string{}
		}
		got[r.Partition][r.Offset] = string(r.Value)
	}
	n := 0
	for p, offs := range a.plain {
		for off, v := range offs {
			n++
			if got[p][off] != v {
				t.Errorf("plain %d/%d: acknowledged %q, after the restart %q", p, off, v, got[p][off])
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return n, len(newest)
}

// TestCompactedKeysOutliveRetention: a compacted topic of the catalogue
// keeps a key whose records are older than the broker's default
// retention (7 days, simulated by the records' timestamps), while a topic
// with that retention drops them.
func TestCompactedKeysOutliveRetention(t *testing.T) {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "table", Partitions: 1, Compacted: true}, {Name: "week", Partitions: 1}})
	cl := testkit.Client(t, b.Addrs())
	ctx := testkit.Context(t, 30*time.Second)
	old := time.Now().Add(-8 * 24 * time.Hour)
	for _, topic := range []string{"table", "week"} {
		for i := range 3 {
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("k", i)), Value: []byte("v"), Timestamp: old}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		// The newest batch is never compacted away: a fresh key follows.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("fresh"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b.Compact()
	if got := len(testkit.ReadAll(t, b.Addrs(), "table")); got != 4 {
		t.Errorf("the compacted topic has %d records after 8 days, want 4", got)
	}
	if got := len(testkit.ReadAll(t, b.Addrs(), "week")); got != 1 {
		t.Errorf("a topic of 7 days' retention has %d records of 4 after 8 days, want 1: the clock is not simulated", got)
	}
}

// TestCompactionResumesAfterRestart: a broker loaded from its data
// directory compacts again without a topic being created or altered.
func TestCompactionResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: "127.0.0.1:0", CompactEvery: time.Hour, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "table", Partitions: 1, Compacted: true}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t, time.Minute)
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Key: []byte("k"), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	b.Close()

	b, err = broker.Start(broker.Config{DataDir: dir, Addr: "127.0.0.1:0", CompactEvery: 5 * time.Millisecond, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	testkit.Eventually(t, 30*time.Second, "the reloaded broker did not compact", func() bool {
		return len(testkit.ReadAll(t, b.Addrs(), "table")) < 10 // kfake keeps the active batch and the one before
	})
}

// TestATransactionAKillLeftOpenEnds: a broker process killed while a
// transaction is open comes back with the transaction aborted and ended by
// its marker, so a reader of committed records reads the partition to its
// end. The load counted such a transaction as aborted but wrote no marker:
// the partition ended in records such a reader never receives, and one
// waiting for the record before the end waited for ever (kfake patch 19).
func TestATransactionAKillLeftOpenEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker process")
	}
	dir := t.TempDir()
	brokers, kill := testkit.BrokerProcess(t, dir, 0)
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: "t", Partitions: 1}})
	ctx := testkit.Context(t, time.Minute)
	put := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := put.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := testkit.Client(t, brokers, kgo.TransactionalID("t-open"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kill()
	brokers, _ = testkit.BrokerProcess(t, dir, 0)
	c := testkit.Cluster(t, brokers)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ends, err := streams.EndOffsets(rctx, c.Admin(), "t")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := streams.ReadRange(rctx, c, "t", nil, ends, func(r *kgo.Record) { got = append(got, string(r.Value)) }); err != nil {
		t.Fatalf("read the partition to its end (%v): %v", ends, err)
	}
	if len(got) != 1 || got[0] != "committed" {
		t.Fatalf("read %q, want the committed record alone", got)
	}
}
