package indexer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/registry/registrytest"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

const partitions = 4

// pipeline runs the registry, a view of its table and the indexer with
// convert until the test ends.
func pipeline(t *testing.T, convert indexer.Converter) []string {
	t.Helper()
	r := newRig(t)
	r.run(r.registry, r.view.Run, r.indexer(convert))
	return r.brokers
}

// rig is a broker with the catalogue and an epoch, a registry view, and
// the components a test runs on them until it ends.
type rig struct {
	brokers []string
	scfg    table.Config
	epochs  *registry.Catalogue
	view    *registry.View
	ctx     context.Context
	wg      sync.WaitGroup
	errs    chan error
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b := testkit.Broker(t, "")
	r := &rig{brokers: b.Addrs(), errs: make(chan error, 8)}
	testkit.EnsureTopics(t, r.brokers, topics.Catalogue(partitions))
	testkit.RegisterEpoch(t, r.brokers, "shop")
	r.epochs = registrytest.FollowEpochs(t, r.brokers)
	r.scfg = table.Config{Cluster: testkit.Cluster(t, r.brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	var err error
	if r.view, err = registry.NewView(r.scfg, "test"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	t.Cleanup(func() {
		cancel()
		r.wg.Wait()
		close(r.errs)
		for err := range r.errs {
			t.Errorf("component failed: %v", err)
		}
	})
	return r
}

// run runs each of fns until the test ends.
func (r *rig) run(fns ...func(context.Context) error) {
	for _, fn := range fns {
		r.wg.Go(func() {
			if err := fn(r.ctx); err != nil {
				r.errs <- err
			}
		})
	}
}

func (r *rig) registry(ctx context.Context) error {
	return registry.Run(ctx, registry.Config{Streams: r.scfg, Rules: registry.DefaultRules(), Epochs: r.epochs, Logger: testkit.Logger()})
}

func (r *rig) indexer(convert indexer.Converter) func(context.Context) error {
	return func(ctx context.Context) error {
		return indexer.Run(ctx, indexer.Config{Cluster: r.scfg.Cluster, Partitions: partitions, Replication: -1,
			Convert: convert, Current: r.view.Get, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
			Logger: testkit.Logger()})
	}
}

// TestSupersededChangesSkipTheSearchFeed: an indexer that finds the queue
// behind the registry (it was away while versions 1 to 5 of every key were
// accepted) delivers to the search feed only what the registry holds, one
// record per key, and every version to the archive (indexing.md: an entry
// whose version is gone is skipped).
func TestSupersededChangesSkipTheSearchFeed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	r := newRig(t)
	r.run(r.registry, r.view.Run)
	const keys, versions = 200, 5
	var docs []*schemas.RawDocument
	for v := 1; v <= versions; v++ { // in version order, so that every one is accepted
		for _, d := range testkit.ShuffledVersions(keys, versions, 3) {
			if d.Version == int64(v) {
				docs = append(docs, d)
			}
		}
	}
	testkit.ProduceDocs(t, r.brokers, "shop", docs)
	testkit.Eventually(t, time.Minute, "the view at every key's last version", func() bool {
		for k := range keys {
			rec, err := r.view.Get(fmt.Sprintf("shop/%d", k))
			if err != nil || rec == nil || rec.Version != versions {
				return false
			}
		}
		return true
	})
	// A batch's changelog comes before its outputs: the view may show a
	// version whose change is still being written.
	testkit.Eventually(t, time.Minute, "every change written", func() bool {
		return len(testkit.ReadAll(t, r.brokers, topics.DocumentsChanges)) == keys*versions
	})
	r.run(r.indexer(nil))
	testkit.Eventually(t, time.Minute, "every version archived", func() bool {
		return len(testkit.ReadAll(t, r.brokers, topics.YtTopic("shop"))) == keys*versions
	})
	saas := testkit.ReadAll(t, r.brokers, topics.SaasTopic("shop"))
	if len(saas) != keys {
		t.Errorf("%d records in the search feed, want one per key (%d)", len(saas), keys)
	}
	for _, rec := range saas {
		var d schemas.SaasDocument
		if err := schemas.SaasDocuments.Decode(rec.Value, &d); err != nil || d.Version != versions {
			t.Errorf("a superseded version in the search feed: %+v %v", d, err)
		}
	}
}

func TestSupersededIsTheRegistrysWord(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000)
	rec := func(v int64, st schemas.Status) *schemas.RegistryRecord {
		return &schemas.RegistryRecord{Epoch: 1, Version: v, Timestamp: at, Status: st}
	}
	for _, c := range []struct {
		cur, ch *schemas.RegistryRecord
		want    bool
	}{
		{nil, rec(1, schemas.StatusLive), false},                                  // a copy that does not show the key yet
		{rec(1, schemas.StatusLive), rec(2, schemas.StatusLive), false},           // a copy behind
		{rec(2, schemas.StatusLive), rec(2, schemas.StatusLive), false},           // current
		{rec(3, schemas.StatusLive), rec(2, schemas.StatusLive), true},            // a fresher version
		{rec(2, schemas.StatusTombstone), rec(2, schemas.StatusLive), true},       // expired since
		{rec(2, schemas.StatusLive), rec(2, schemas.StatusTombstone), false},      // a copy behind the expiry
		{rec(2, schemas.StatusTombstone), rec(2, schemas.StatusTombstone), false}, // current
	} {
		if got := indexer.Superseded(c.cur, c.ch); got != c.want {
			t.Errorf("Superseded(%+v, %+v) = %v", c.cur, c.ch, got)
		}
	}
}

func TestSearchFeedEndsWithTheRegistrysRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	brokers := pipeline(t, nil)
	const keys, versions = 1000, 10
	testkit.ProduceDocs(t, brokers, "shop", testkit.ShuffledVersions(keys, versions, 7))
	testkit.Eventually(t, 2*time.Minute, "every key's freshest version in the search feed", func() bool {
		last := testkit.LastSaas(t, brokers, "shop")
		if len(last) < keys {
			return false
		}
		for _, d := range last {
			if d.Version != versions {
				return false
			}
		}
		return true
	})
	table := testkit.Table(t, brokers, topics.RegistryTable)
	last := testkit.LastSaas(t, brokers, "shop")
	for key, raw := range table {
		var rec schemas.RegistryRecord
		if err := schemas.RegistryRecords.Decode(raw, &rec); err != nil {
			t.Fatal(err)
		}
		d := last[key]
		if d.Version != rec.Version || d.Epoch != rec.Epoch || !d.Timestamp.Equal(rec.Timestamp) ||
			*d.Fields[0].String != *rec.Fields[0].String || d.Action != schemas.ActionUpsert {
			t.Fatalf("%s: search feed %+v, registry %+v", key, d, rec)
		}
	}
	// The archive holds every accepted version, once per change.
	accepted := 0
	for _, r := range testkit.ReadAll(t, brokers, topics.DocumentsResults) {
		var v schemas.Verdict
		if err := schemas.Verdicts.Decode(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if v.Verdict == schemas.Accepted {
			accepted++
		}
	}
	testkit.Eventually(t, time.Minute, "the archive", func() bool {
		return len(testkit.ReadAll(t, brokers, topics.YtTopic("shop"))) == accepted
	})
}

func TestFailedConversionsAreRetriedNeverDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	var flaky atomic.Int32
	convert := func(r *schemas.RegistryRecord) (indexer.Converted, error) {
		// Key 5 fails its first three conversions; version 1 of key 7
		// always fails, so its retry meets version 2 in the registry.
		if r.PK == "5" && flaky.Add(1) <= 3 {
			return indexer.Converted{}, errors.New("search engine unavailable")
		}
		if r.PK == "7" && r.Version == 1 {
			return indexer.Converted{Saas: nil}, errors.New("version 1 of 7 cannot be converted")
		}
		return indexer.Convert(r)
	}
	brokers := pipeline(t, convert)
	docs := testkit.ShuffledVersions(10, 1, 1)
	testkit.ProduceDocs(t, brokers, "shop", docs)
	testkit.Eventually(t, time.Minute, "key 5 delivered after its retries", func() bool {
		return testkit.LastSaas(t, brokers, "shop")["shop/5"].Version == 1
	})
	// Version 2 of key 7 supersedes the failing version 1.
	v2 := testkit.ShuffledVersions(8, 2, 1)
	var seven []*schemas.RawDocument
	for _, d := range v2 {
		if d.PK == "7" && d.Version == 2 {
			seven = append(seven, d)
		}
	}
	testkit.ProduceDocs(t, brokers, "shop", seven)
	testkit.Eventually(t, time.Minute, "key 7 at version 2", func() bool {
		return testkit.LastSaas(t, brokers, "shop")["shop/7"].Version == 2
	})
	failed := testkit.ReadAll(t, brokers, topics.DocumentsFailed)
	reasons := map[string]int{}
	for _, r := range failed {
		var f schemas.FailedConversion
		if err := schemas.FailedConversions.Decode(r.Value, &f); err != nil {
			t.Fatal(err)
		}
		reasons[string(r.Key)]++
		if f.Reason == "" || f.Attempts < 1 {
			t.Fatalf("failed record without reason or attempts: %+v", f)
		}
	}
	if reasons["shop/5"] != 3 {
		t.Fatalf("key 5 was queued %d times, want 3", reasons["shop/5"])
	}
	if reasons["shop/7"] < 1 {
		t.Fatal("key 7's version 1 never reached the failed queue")
	}
	// The superseded version never reached the search feed.
	for _, r := range testkit.ReadAll(t, brokers, topics.SaasTopic("shop")) {
		var d schemas.SaasDocument
		if err := schemas.SaasDocuments.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		if d.PK == "7" && d.Version == 1 {
			t.Fatal("a superseded version of 7 was delivered to the search feed")
		}
	}
	if len(testkit.LastSaas(t, brokers, "shop")) != 10 {
		t.Fatalf("the search feed has %d keys, want 10", len(testkit.LastSaas(t, brokers, "shop")))
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempts int
		want     time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, time.Minute}}
	for _, tt := range tests {
		if got := indexer.Backoff(tt.attempts, time.Second, time.Minute); got != tt.want {
			t.Errorf("Backoff(%d) = %s, want %s", tt.attempts, got, tt.want)
		}
	}
}

func TestConvert(t *testing.T) {
	title := "bike"
	live := &schemas.RegistryRecord{Client: "shop", PK: "1", Epoch: 1, Version: 2, Status: schemas.StatusLive,
		Cause: schemas.CauseIngest, Fields: []schemas.Field{{Name: "title", String: &title}}}
	c, err := indexer.Convert(live)
	if err != nil || c.Saas.Action != schemas.ActionUpsert || c.Yt == nil || len(c.Saas.Fields) != 1 {
		t.Fatalf("live: %+v %v", c, err)
	}
	expired := *live
	expired.Status, expired.Cause = schemas.StatusTombstone, schemas.CauseExpiry
	c, err = indexer.Convert(&expired)
	if err != nil || c.Saas.Action != schemas.ActionDelete || c.Yt != nil || len(c.Saas.Fields) != 0 {
		t.Fatalf("expiry: %+v %v", c, err)
	}
	bad := *live
	bad.Status = "MAYBE"
	if _, err := indexer.Convert(&bad); err == nil {
		t.Fatal("unknown status converted")
	}
}

func TestUndecodableChangesGoToTheDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	brokers := pipeline(t, nil)
	cl := testkit.Client(t, brokers)
	recs := []*kgo.Record{
		{Topic: topics.DocumentsChanges, Key: []byte("shop/x"), Value: []byte("garbage")},
		{Topic: topics.DocumentsFailed, Key: []byte("shop/y"), Value: []byte("more garbage")},
	}
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.ProduceDocs(t, brokers, "shop", testkit.ShuffledVersions(1, 1, 1))
	testkit.Eventually(t, time.Minute, "the document after the garbage delivered", func() bool {
		return testkit.LastSaas(t, brokers, "shop")["shop/0"].Version == 1
	})
	groups := map[string]string{}
	testkit.Eventually(t, time.Minute, "two dead letters", func() bool {
		for _, r := range testkit.ReadAll(t, brokers, topics.DocumentsDead) {
			var d schemas.DeadLetter
			if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
				t.Fatal(err)
			}
			groups[d.Group] = string(d.Value)
		}
		return len(groups) == 2
	})
	if groups[indexer.Group] != "garbage" || groups[indexer.RetryGroup] != "more garbage" {
		t.Fatalf("dead letters: %v", groups)
	}
}

// TestTheUrgentQueueOvertakesTheMainOne: while the main queue is stuck (its
// conversions wait), a document posted with priority urgent reaches the
// search feed through documents.urgent; once the main queue moves, every
// document is there and archived once.
func TestTheUrgentQueueOvertakesTheMainOne(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	stuck := func(r *schemas.RegistryRecord) (indexer.Converted, error) {
		if r.PK != "urgent" {
			<-release
		}
		return indexer.Convert(r)
	}
	r := newRig(t)
	r.run(r.registry, r.view.Run, r.indexer(stuck))
	testkit.ProduceDocs(t, r.brokers, "shop", testkit.ShuffledVersions(20, 1, 5))
	urgent := testkit.ShuffledVersions(1, 1, 5)[0]
	urgent.PK = "urgent"
	data, err := schemas.RawDocuments.Encode(urgent)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, r.brokers, topics.DocumentsIngest, []byte("shop/urgent"), data) // a normal post of the same would wait
	cl := testkit.Client(t, r.brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	urgent.Version = 2
	if data, err = schemas.RawDocuments.Encode(urgent); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte("shop/urgent"), Value: data,
		Headers: []kgo.RecordHeader{{Key: topics.PriorityHeader, Value: []byte(topics.PriorityUrgent)}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the urgent document in the search feed", func() bool {
		return testkit.LastSaas(t, r.brokers, "shop")["shop/urgent"].Version == 2
	})
	if n := len(testkit.LastSaas(t, r.brokers, "shop")); n != 1 {
		t.Fatalf("%d keys in the search feed while the main queue is stuck, want the urgent one", n)
	}
	if n := len(testkit.ReadAll(t, r.brokers, topics.DocumentsUrgent)); n != 1 {
		t.Errorf("%d records on documents.urgent, want the urgent version's change", n)
	}
	once.Do(func() { close(release) })
	testkit.Eventually(t, time.Minute, "every document in the search feed", func() bool {
		return len(testkit.LastSaas(t, r.brokers, "shop")) == 21 && len(testkit.ReadAll(t, r.brokers, topics.YtTopic("shop"))) == 22
	})
	if v := testkit.LastSaas(t, r.brokers, "shop")["shop/urgent"].Version; v != 2 {
		t.Errorf("the urgent document at version %d after the main queue, want 2", v)
	}
}
