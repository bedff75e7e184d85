package table_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// runView runs v until the test ends, or stop is called; it returns stop.
func runView(t *testing.T, v *table.View) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("view: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case <-v.Ready():
	case err := <-done:
		t.Fatalf("view stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("view not ready after 30 s")
	}
	return stop
}

// TestAViewCopiesItsTable: a view is ready with what the topic held, keeps
// up with later writes and deletes (Sync), lists the keys of every
// partition in key order within a range, answers an error (not a crash)
// once stopped, and a view restarted on its store reads on from its offsets
// without losing a delete made while it was down.
func TestAViewCopiesItsTable(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	const topic = "view-table"
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: topic, Partitions: 4, Compacted: true}})
	for i := range 20 {
		testkit.Put(t, brokers, topic, fmt.Appendf(nil, "k/%02d", i), fmt.Appendf(nil, "v%d", i))
	}
	cfg := table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	v := table.NewView(cfg, topic, streams.Bytes{}, "test")
	if _, err := v.Get("k/01"); err == nil {
		t.Error("a view that never ran answered a Get")
	}
	stop := runView(t, v)
	get := func(key string) string {
		t.Helper()
		val, err := v.Get(key)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		if val == nil {
			return "<none>"
		}
		return string(val.([]byte))
	}
	if got := get("k/07"); got != "v7" {
		t.Fatalf("k/07 = %s once ready, want v7", got)
	}
	// Changed, taken before a write, is closed once the view has read it,
	// and the value is there then.
	changed := v.Changed()
	testkit.Put(t, brokers, topic, []byte("k/07"), []byte("again"))
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("Changed not closed 30 s after a write")
	}
	if got := get("k/07"); got != "again" {
		t.Fatalf("k/07 = %s once Changed was closed, want again", got)
	}
	testkit.Put(t, brokers, topic, []byte("k/03"), nil)
	if err := v.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, gone := get("k/07"), get("k/03"); got != "again" || gone != "<none>" {
		t.Fatalf("after sync: k/07 = %s, k/03 = %s; want again, <none>", got, gone)
	}
	it, err := v.IteratorWithRange("k/10", "k/15")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for it.Next() {
		keys = append(keys, it.Key())
	}
	it.Release()
	if want := []string{"k/10", "k/11", "k/12", "k/13", "k/14"}; !slices.Equal(keys, want) {
		t.Fatalf("range k/10..k/15: %v, want %v (every partition's keys, in order)", keys, want)
	}
	stop()
	if _, err := v.Get("k/07"); err == nil {
		t.Error("a stopped view answered a Get")
	}
	testkit.Put(t, brokers, topic, []byte("k/05"), nil)
	testkit.Put(t, brokers, topic, []byte("k/20"), []byte("v20"))
	again := table.NewView(cfg, topic, streams.Bytes{}, "test")
	runView(t, again)
	v = again
	if err := v.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, b, c := get("k/05"), get("k/20"), get("k/07"); a != "<none>" || b != "v20" || c != "again" {
		t.Fatalf("after a restart: k/05 = %s, k/20 = %s, k/07 = %s; want <none>, v20, again", a, b, c)
	}
	n := 0
	all, err := v.Iterator()
	if err != nil {
		t.Fatal(err)
	}
	for all.Next() {
		n++
	}
	all.Release()
	if n != 19 { // 20 keys, two deleted, k/20 added
		t.Fatalf("the view holds %d keys, want 19", n)
	}
}

// TestAViewReadsPastTransactionMarkers: a view of a topic written in
// transactions (every partition ends with a marker, which no record
// handed to the view carries) is ready, and Sync returns after a later
// transaction, with what the transactions committed and nothing of the
// one aborted.
func TestAViewReadsPastTransactionMarkers(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	const topic = "view-tx"
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: topic, Partitions: 2, Compacted: true}})
	cl := testkit.Client(t, brokers, kgo.TransactionalID("view-tx"), kgo.DefaultProduceTopic(topic))
	ctx := testkit.Context(t, time.Minute)
	write := func(key, value string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		write(fmt.Sprintf("k/%d", i), fmt.Sprintf("v%d", i), kgo.TryCommit)
	}
	v := table.NewView(table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()},
		topic, streams.Bytes{}, "tx")
	runView(t, v) // fails the test unless ready: the markers read
	write("k/1", "aborted", kgo.TryAbort)
	write("k/2", "again", kgo.TryCommit)
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"k/0": "v0", "k/1": "v1", "k/2": "again", "k/5": "v5"} {
		got, err := v.Get(key)
		if err != nil || got == nil || string(got.([]byte)) != want {
			t.Errorf("%s = %v (%v), want %s", key, got, err, want)
		}
	}
}

// TestAViewBehindSaysSo: a view whose fetches fail (a stuck fetch) while
// its topic grows says how far behind it is, refuses reads once past its
// bound (StaleAfter) and ends its Run once a partition has stood still
// for StuckAfter; started again with the fault gone, it catches up and
// answers the writes it had missed.
func TestAViewBehindSaysSo(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	const topic = "view-stale"
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: topic, Partitions: 2, Compacted: true}})
	testkit.Put(t, brokers, topic, []byte("k"), []byte("v1"))
	cfg := table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	v := table.NewView(cfg, topic, streams.Bytes{}, "stale")
	v.StaleAfter, v.StuckAfter = 500*time.Millisecond, 2*time.Second
	if _, err := v.Get("k"); err == nil {
		t.Fatal("a view that never ran answered a Get")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-v.Ready()
	if got, err := v.Get("k"); err != nil || string(got.([]byte)) != "v1" {
		t.Fatalf("k = %v %v once ready, want v1", got, err)
	}
	if err := v.Fresh(); err != nil {
		t.Fatalf("caught up, Fresh says %v", err)
	}

	var failing atomic.Bool
	failing.Store(true)
	var failed atomic.Int64
	b.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		if !failing.Load() {
			return nil, nil, false
		}
		failed.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	testkit.Put(t, brokers, topic, []byte("k"), []byte("v2"))
	testkit.Eventually(t, 30*time.Second, "reads refused as stale", func() bool {
		_, err := v.Get("k")
		return errors.Is(err, table.ErrStale) && v.Staleness() > v.StaleAfter
	})
	if err := v.Fresh(); !errors.Is(err, table.ErrStale) {
		t.Fatalf("Fresh of a stale view: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, table.ErrStuck) {
			t.Fatalf("the stuck view's Run ended with %v, want ErrStuck", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck view's Run did not end")
	}
	if failed.Load() == 0 {
		t.Fatal("no fetch failed")
	}

	failing.Store(false)
	go func() { done <- v.Run(ctx) }()
	testkit.Eventually(t, 30*time.Second, "the restarted view at v2", func() bool {
		got, err := v.Get("k")
		return err == nil && string(got.([]byte)) == "v2"
	})
	if d := v.Staleness(); d != 0 {
		t.Errorf("caught up again, staleness %v", d)
	}
}
