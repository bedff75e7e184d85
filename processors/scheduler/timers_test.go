package scheduler

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// TestTimersResumeFromTheirStore restarts the timer service on the same
// store: it reads only what came after, and keeps every pending timer.
func TestTimersResumeFromTheirStore(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, time.Minute)
	put := func(from, to int) {
		for i := from; i < to; i++ {
			data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: fmt.Sprint("o", i), Stage: "s", DueAt: time.Now().Add(time.Hour).UnixMilli()})
			prod.Produce(ctx, &kgo.Record{Topic: topics.SchedulerTimers, Key: []byte(fmt.Sprint("o", i, "/s")), Value: data}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	run := func() (*Metrics, *int, func()) {
		m := NewMetrics(metrics.New())
		read := new(int)
		tm := &Timers{Cluster: testkit.Cluster(t, brokers), Dir: dir, Prod: prod, Metrics: m, Logger: testkit.Logger()}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- tm.Run(rctx) }()
		return m, read, func() { cancel(); <-done }
	}
	put(0, 100)
	m, _, stop := run()
	testkit.Eventually(t, 30*time.Second, "100 timers", func() bool { return m.Pending.Value() == 100 })
	stop()
	put(100, 110)
	m, _, stop = run()
	defer stop()
	testkit.Eventually(t, 30*time.Second, "110 timers after the restart", func() bool { return m.Pending.Value() == 110 })
	if n := m.TimerRecords.Value(); n != 10 {
		t.Errorf("the restarted service read %d records, want the 10 new ones", n)
	}
}

// TestTimersReplaceAStoreOfAnEarlierRelease: a timer store of an earlier
// release (LevelDB, in the directory itself), even one that claims to have
// read the whole topic, is removed, and the service reads the topic again
// from its start into its Pebble store.
func TestTimersReplaceAStoreOfAnEarlierRelease(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, time.Minute)
	for i := range 50 {
		data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: fmt.Sprint("o", i), Stage: "s", DueAt: time.Now().Add(time.Hour).UnixMilli()})
		prod.Produce(ctx, &kgo.Record{Topic: topics.SchedulerTimers, Key: []byte(fmt.Sprint("o", i, "/s")), Value: data}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	old, err := leveldb.OpenFile(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"0", "1"} {
		if err := old.Put([]byte("o/"+p), []byte("1000"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(metrics.New())
	tm := &Timers{Cluster: testkit.Cluster(t, brokers), Dir: dir, Prod: prod, Metrics: m, Logger: testkit.Logger()}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tm.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testkit.Eventually(t, 30*time.Second, "50 timers read again", func() bool { return m.Pending.Value() == 50 })
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "pebble" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the store's directory holds %v, want only pebble", names)
	}
}
