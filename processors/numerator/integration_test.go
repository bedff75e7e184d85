package numerator_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

type cluster struct {
	t       *testing.T
	brokers []string
	cfg     numerator.Config
	stop    func()
}

// testConfig is the numerator configuration of the tests: state in
// stateDir, an in-process coordinator, quick retries.
func testConfig(t testing.TB, brokers []string, stateDir string, ttl int64, share float64) numerator.Config {
	cfg := numerator.DefaultConfig()
	cfg.Streams = table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: stateDir, Replication: 1, Logger: testkit.Logger()}
	cfg.Coordinator = &coordinator.Local{}
	cfg.TTL, cfg.RebuildShare, cfg.RetryEvery = ttl, share, 50*time.Millisecond
	cfg.Logger = testkit.Logger()
	return cfg
}

// newStopped returns a cluster with the catalogue whose numerator is not
// started yet.
func newStopped(t *testing.T, ttl int64, share float64) *cluster {
	t.Helper()
	b := testkit.Broker(t, "")
	c := &cluster{t: t, brokers: b.Addrs(), stop: func() {}}
	testkit.EnsureTopics(t, c.brokers, topics.Catalogue(4))
	c.cfg = testConfig(t, c.brokers, t.TempDir(), ttl, share)
	t.Cleanup(func() { c.stop() })
	return c
}

func newCluster(t *testing.T, ttl int64, share float64) *cluster {
	t.Helper()
	c := newStopped(t, ttl, share)
	c.start()
	return c
}

func (c *cluster) start() {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- numerator.Run(ctx, c.cfg) }()
	c.stop = func() {
		cancel()
		if err := <-errc; err != nil {
			c.t.Errorf("numerator: %v", err)
		}
		c.stop = func() {}
	}
}

func key(i int) sharding.Key {
	return sharding.Key{BusinessID: uint64(1 + i%7), OfferID: fmt.Sprintf("sku-%04d", i), ShopID: 10, WarehouseID: 1}
}

func (c *cluster) produce(recs ...*kgo.Record) {
	c.t.Helper()
	cl := testkit.Client(c.t, c.brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(testkit.Context(c.t, time.Minute), recs...).FirstErr(); err != nil {
		c.t.Fatal(err)
	}
}

// offers sends keys lo..hi-1 as seen in generation g.
func (c *cluster) offers(g int64, lo, hi int) {
	var recs []*kgo.Record
	for i := lo; i < hi; i++ {
		k := key(i)
		data, err := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: int64(k.BusinessID), OfferID: k.OfferID,
			ShopID: int64(k.ShopID), WarehouseID: int64(k.WarehouseID), Generation: g})
		if err != nil {
			c.t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topics.NumeratorOffers, Key: []byte(k.String()), Value: data})
	}
	c.produce(recs...)
}

// marker sends a marker and waits for the state it makes (the n-th).
func (c *cluster) marker(m schemas.GenerationMarker, n int) schemas.NumeratorState {
	c.t.Helper()
	data, err := schemas.GenerationMarkers.Encode(&m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.produce(&kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: data})
	var st schemas.NumeratorState
	testkit.Eventually(c.t, time.Minute, fmt.Sprintf("state %d after %s", n, m.Action), func() bool {
		recs := testkit.ReadAll(c.t, c.brokers, topics.NumeratorStates)
		if len(recs) < n {
			return false
		}
		return schemas.NumeratorStates.Decode(recs[n-1].Value, &st) == nil
	})
	// and for the numerator group to apply its results
	testkit.Eventually(c.t, time.Minute, "results applied", func() bool {
		return c.applied()
	})
	return st
}

func (c *cluster) seal(g int64, n int) schemas.NumeratorState {
	return c.marker(schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: g, Scheme: -1}, n)
}

// applied reports whether the numerator group has applied every result.
func (c *cluster) applied() bool {
	adm := testkit.Admin(c.t, c.brokers)
	ctx := testkit.Context(c.t, 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topics.NumeratorResults)
	if err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	return streams.WaitCommitted(wctx, adm, string(numerator.Group), ends.Offsets()) == nil
}

type placed struct {
	shard int32
	doc   int64
}

// assignments returns the last assignment of every key.
func (c *cluster) assignments() map[string]placed {
	out := map[string]placed{}
	for _, r := range testkit.ReadAll(c.t, c.brokers, topics.NumeratorAssignments) {
		var a schemas.Assignment
		if err := schemas.Assignments.Decode(r.Value, &a); err != nil {
			c.t.Fatal(err)
		}
		out[string(r.Key)] = placed{a.Shard, a.DocID}
	}
	return out
}

// checkUnique checks that live keys have unique ids per shard and returns
// per shard the ids in use.
func checkUnique(t *testing.T, as map[string]placed) map[int32]map[int64]string {
	t.Helper()
	byShard := map[int32]map[int64]string{}
	for k, p := range as {
		if p.doc == numerator.NoDocID {
			continue
		}
		if byShard[p.shard] == nil {
			byShard[p.shard] = map[int64]string{}
		}
		if other, dup := byShard[p.shard][p.doc]; dup {
			t.Fatalf("%s and %s share doc_id %d in shard %d", k, other, p.doc, p.shard)
		}
		byShard[p.shard][p.doc] = k
	}
	return byShard
}

// checkDense checks that each shard's live keys hold the ids 0 to n-1.
func checkDense(t *testing.T, as map[string]placed) {
	t.Helper()
	for shard, ids := range checkUnique(t, as) {
		for id := range int64(len(ids)) {
			if _, ok := ids[id]; !ok {
				t.Fatalf("shard %d: %d keys but id %d unused", shard, len(ids), id)
			}
		}
	}
}

// Seed case 5: the main case without a rebuild: new documents get new ids.
func TestNewKeysGetNewIds(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.offers(1, 0, 100)
	st := c.seal(1, 1)
	first := c.assignments()
	if len(first) != 100 || st.Version != "0.0.0.1" {
		t.Fatalf("%d assignments, version %s", len(first), st.Version)
	}
	checkDense(t, first)
	c.offers(2, 0, 120)
	c.seal(2, 2)
	second := c.assignments()
	for k, p := range first {
		if second[k] != p {
			t.Fatalf("%s moved from %v to %v", k, p, second[k])
		}
	}
	checkDense(t, second)
	if len(second) != 120 {
		t.Fatalf("%d assignments", len(second))
	}
}

// Seed case 2: the generation is past the TTL but nobody expired.
func TestPastTTLWithoutExpiredKeys(t *testing.T) {
	c := newCluster(t, 2, 0)
	for g := int64(1); g <= 3; g++ {
		c.offers(g, 0, 50)
		c.seal(g, int(g))
	}
	c.offers(4, 0, 60)
	st := c.seal(4, 4)
	checkDense(t, c.assignments())
	var expired int64
	for _, s := range st.Shards {
		expired += s.Expired
	}
	if expired != 0 || len(c.assignments()) != 60 {
		t.Fatalf("expired %d, %d assignments", expired, len(c.assignments()))
	}
}

// Seed case 3: expired keys' ids go to new keys first, then the ids after
// the maximum.
func TestExpiredIdsAreReused(t *testing.T) {
	c := newCluster(t, 1, 0)
	c.offers(1, 0, 60)
	c.seal(1, 1)
	before := c.assignments()
	c.offers(2, 10, 60) // 0..9 vanish
	c.offers(2, 60, 80) // 20 new
	st := c.seal(2, 2)
	after := c.assignments()
	checkUnique(t, after)
	freed := map[int32]map[int64]bool{}
	for i := range 10 {
		p := before[key(i).String()]
		if after[key(i).String()].doc != numerator.NoDocID {
			t.Fatalf("key %d kept its id past the TTL", i)
		}
		if freed[p.shard] == nil {
			freed[p.shard] = map[int64]bool{}
		}
		freed[p.shard][p.doc] = true
	}
	maxBefore := map[int32]int64{}
	for _, p := range before {
		maxBefore[p.shard] = max(maxBefore[p.shard], p.doc)
	}
	reused := 0
	for i := 60; i < 80; i++ {
		p := after[key(i).String()]
		if freed[p.shard][p.doc] {
			reused++
			delete(freed[p.shard], p.doc)
		} else if len(freed[p.shard]) > 0 && p.doc > maxBefore[p.shard] {
			t.Fatalf("key %d got %d after the maximum while shard %d had free ids", i, p.doc, p.shard)
		}
	}
	var expired int64
	for _, s := range st.Shards {
		expired += s.Expired
	}
	if reused == 0 || expired != 10 {
		t.Fatalf("reused %d, expired %d", reused, expired)
	}
}

// Seed case 4: the automatic rebuild when holes exceed the share.
func TestAutomaticRebuild(t *testing.T) {
	c := newCluster(t, 1, 0.3)
	c.offers(1, 0, 100)
	c.seal(1, 1)
	c.offers(2, 0, 40)
	st := c.seal(2, 2)
	if !st.Rebuilt || st.Version != "0.0.1.1" { // G grows only with new doc_ids: the seal of 2 added none
		t.Fatalf("state %+v", st)
	}
	for _, s := range st.Shards {
		if s.MaxDocID+1 != s.Live || s.Free != 0 {
			t.Fatalf("shard %+v after the rebuild", s)
		}
	}
	checkDense(t, c.assignments())
}

// Seed case 1: a forced rebuild leaves every shard the size of the latest
// input: the 30 keys not seen in generation 2 lose their ids, although
// the TTL (10 generations) keeps them.
func TestForcedRebuild(t *testing.T) {
	c := newCluster(t, 10, 0)
	c.offers(1, 0, 100)
	c.seal(1, 1)
	c.offers(2, 0, 70)
	st := c.seal(2, 2)
	if st.Rebuilt {
		t.Fatal("rebuilt without being asked")
	}
	st = c.marker(schemas.GenerationMarker{Action: schemas.MarkerRebuild, Scheme: -1}, 3)
	if !st.Rebuilt || st.Version != "0.0.1.1" { // G grows only with new doc_ids: the seal of 2 added none
		t.Fatalf("state %+v", st)
	}
	live := int64(0)
	for _, s := range st.Shards {
		if s.MaxDocID+1 != s.Live {
			t.Fatalf("shard %+v", s)
		}
		live += s.Live
	}
	if live != 70 {
		t.Fatalf("%d live keys after the rebuild", live)
	}
	checkDense(t, c.assignments())
}

func TestReshard(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.offers(1, 0, 100)
	c.seal(1, 1)
	st := c.marker(schemas.GenerationMarker{Action: schemas.MarkerReshard, Scheme: 1}, 2)
	if st.Version != "0.1.1.1" || len(st.Shards) != 32 {
		t.Fatalf("state %s with %d shards", st.Version, len(st.Shards))
	}
	scheme, _ := sharding.Get(1)
	as := c.assignments()
	for i := range 100 {
		if p := as[key(i).String()]; int(p.shard) != scheme.Shard(key(i)) {
			t.Fatalf("key %d in shard %d, scheme 1 says %d", i, p.shard, scheme.Shard(key(i)))
		}
	}
	checkDense(t, as)
}

func TestBadInputGoesToTheDeadLetters(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.offers(2, 0, 3)
	good, _ := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: 1, OfferID: "x", ShopID: 1, WarehouseID: 1, Generation: 1})
	noShop, _ := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: 1, OfferID: "x", ShopID: 0, WarehouseID: 1, Generation: 1})
	k0 := key(0)
	back, _ := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: int64(k0.BusinessID), OfferID: k0.OfferID,
		ShopID: int64(k0.ShopID), WarehouseID: int64(k0.WarehouseID), Generation: 1})
	c.produce(
		&kgo.Record{Topic: topics.NumeratorOffers, Key: []byte("1/x/1/1"), Value: []byte("junk")},
		&kgo.Record{Topic: topics.NumeratorOffers, Key: []byte("1/y/1/1"), Value: good},
		&kgo.Record{Topic: topics.NumeratorOffers, Key: []byte("1/x/0/1"), Value: noShop},
		&kgo.Record{Topic: topics.NumeratorOffers, Key: []byte(k0.String()), Value: back},
	)
	// A key on another partition than murmur2 gives it: its entry is not there.
	misplaced := key(99).String()
	seen, _ := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: int64(key(99).BusinessID), OfferID: key(99).OfferID,
		ShopID: int64(key(99).ShopID), WarehouseID: int64(key(99).WarehouseID), Generation: 2})
	ends, err := streams.EndOffsets(testkit.Context(t, time.Minute), testkit.Admin(t, c.brokers), topics.NumeratorOffers)
	if err != nil {
		t.Fatal(err)
	}
	n := int32(len(ends))
	manual := testkit.Client(t, c.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := manual.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.NumeratorOffers, Key: []byte(misplaced),
		Value: seen, Partition: (streams.Partition(misplaced, n) + 1) % n}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.seal(2, 1)
	old, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: 1, Scheme: -1})
	unknown, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: 9, Scheme: -1})
	c.produce(&kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: old},
		&kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: []byte("junk")},
		&kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: unknown})
	want := []string{"undecodable offer", "name different offers", "shop_id is missing", "goes back",
		"not after the sealed generation", "undecodable marker", "generation 9 is unknown", "belongs on partition"}
	testkit.Eventually(t, time.Minute, "eight dead letters", func() bool {
		var reasons []string
		for _, r := range testkit.ReadAll(t, c.brokers, topics.NumeratorDead) {
			var d schemas.DeadLetter
			if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
				t.Fatal(err)
			}
			reasons = append(reasons, d.Reason)
		}
		all := strings.Join(reasons, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				return false
			}
		}
		return true
	})
	if as := c.assignments(); len(as) != 3 {
		t.Fatalf("%d assignments, want the 3 good keys", len(as))
	}
}

// The numerator stopped in the middle of a generation and started again
// ends with the assignments of an uninterrupted run.
func TestRestartMidGenerationGivesTheSameIds(t *testing.T) {
	interrupted := newCluster(t, 1, 0)
	interrupted.offers(1, 0, 80)
	interrupted.seal(1, 1)
	interrupted.offers(2, 20, 50)
	interrupted.stop()
	interrupted.offers(2, 50, 100)
	interrupted.start()
	interrupted.seal(2, 2)

	straight := newCluster(t, 1, 0)
	straight.offers(1, 0, 80)
	straight.seal(1, 1)
	straight.offers(2, 20, 100)
	straight.seal(2, 2)

	sameAssignments(t, interrupted.assignments(), straight.assignments(), 100)
}

// sameAssignments fails the test unless a (after an interruption) and b
// (without) both hold n keys with the same shards and doc_ids.
func sameAssignments(t *testing.T, a, b map[string]placed, n int) {
	t.Helper()
	if len(a) != len(b) || len(a) != n {
		t.Fatalf("%d and %d assignments, want %d", len(a), len(b), n)
	}
	for k, p := range a {
		if b[k] != p {
			t.Fatalf("%s: %v after the interruption, %v without", k, p, b[k])
		}
	}
}

// TestNumeratorProcess is not a test of its own: the kill test runs the test
// binary with it selected, to have a numerator in a process it can kill.
func TestNumeratorProcess(t *testing.T) {
	brokers := os.Getenv("OFFERLOG_TEST_NUMERATOR_BROKERS")
	if brokers == "" {
		t.Skip("runs only as the process TestKilledMidGenerationGivesTheSameIds kills")
	}
	cfg := testConfig(t, strings.Split(brokers, ","), os.Getenv("OFFERLOG_TEST_NUMERATOR_STATE"), 1, 0)
	err := numerator.Run(context.Background(), cfg)
	t.Fatalf("the numerator returned before it was killed: %v", err)
}

func TestKilledMidGenerationGivesTheSameIds(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newStopped(t, 1, 0)
	kill := testkit.Child(t, "TestNumeratorProcess", "OFFERLOG_TEST_NUMERATOR_BROKERS="+strings.Join(c.brokers, ","),
		"OFFERLOG_TEST_NUMERATOR_STATE="+c.cfg.Streams.StateDir)
	c.offers(1, 0, 300)
	c.seal(1, 1)
	c.offers(2, 50, 200)
	// Kill it while it records generation 2: no shutdown, no last commit.
	testkit.Eventually(t, time.Minute, "part of generation 2 recorded", func() bool {
		seen := 0
		for _, r := range testkit.ReadAll(t, c.brokers, topics.NumeratorTable) {
			var e schemas.NumeratorEntry
			if r.Value != nil && schemas.NumeratorEntries.Decode(r.Value, &e) == nil && e.LastSeen == 2 {
				seen++
			}
		}
		return seen > 20
	})
	kill()
	c.start()
	c.offers(2, 200, 350)
	c.seal(2, 2)

	straight := newCluster(t, 1, 0)
	straight.offers(1, 0, 300)
	straight.seal(1, 1)
	straight.offers(2, 50, 350)
	straight.seal(2, 2)

	sameAssignments(t, c.assignments(), straight.assignments(), 350)

	// The table is the one the log implies: the same entries as the
	// uninterrupted run's, in the changelog and in the local stores.
	c.stop()
	straight.stop()
	killed, clean := testkit.Table(t, c.brokers, topics.NumeratorTable), testkit.Table(t, straight.brokers, topics.NumeratorTable)
	if len(killed) != 350 || !maps.EqualFunc(killed, clean, bytes.Equal) {
		t.Fatalf("the table after the kill (%d keys) differs from the uninterrupted run's (%d)", len(killed), len(clean))
	}
	if local := testkit.LocalTable(t, c.cfg.Streams.StateDir, string(numerator.Group), string(topics.NumeratorTable)); !maps.EqualFunc(local, killed, bytes.Equal) {
		t.Fatalf("the local stores (%d keys) differ from the changelog (%d)", len(local), len(killed))
	}
}

// TestSealWaitsForTheWriteLock runs the numerator with the coordinator in a
// real ZooKeeper while another master holds the lock: the seal waits, then
// happens under its own ticket, and the state pointer moves to it.
func TestSealWaitsForTheWriteLock(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	zkAddr := testkit.ZooKeeper(t)
	dial := func() *coordinator.ZooKeeper { return dialCoordinator(t, zkAddr) }
	other := dial()
	ctx := testkit.Context(t, 2*time.Minute)
	held, err := other.Acquire(ctx, "dc-b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	c := newStopped(t, 10, 0)
	c.cfg.Coordinator, c.cfg.Holder, c.cfg.Cluster = dial(), "dc-a", "kafka-a"
	c.cfg.Metrics = numerator.NewMetrics(metrics.New())
	c.start()
	c.offers(1, 0, 20)
	data, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: 1, Scheme: -1})
	c.produce(&kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: data})

	// While dc-b holds the lock, dc-a has asked for it and written nothing.
	testkit.Eventually(t, time.Minute, "the sealer refused the lock", func() bool {
		return c.cfg.Metrics.LockRefused.Value() > 0
	})
	if n := len(testkit.ReadAll(t, c.brokers, topics.NumeratorStates)); n != 0 {
		t.Fatalf("%d states written while another master held the lock", n)
	}
	if cur, ok, _ := other.Current(ctx); !ok || cur.Holder != "dc-b" {
		t.Fatalf("lock %+v", cur)
	}
	if err := other.Report(ctx, held.Ticket, nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the pointer at dc-a's state", func() bool {
		p, ok, err := other.State(ctx)
		return err == nil && ok && p.Holder == "dc-a" && p.Version == "0.0.0.1" && p.Cluster == "kafka-a" && p.Ticket > held.Ticket
	})
	var st schemas.NumeratorState
	recs := testkit.ReadAll(t, c.brokers, topics.NumeratorStates)
	if len(recs) != 1 || schemas.NumeratorStates.Decode(recs[0].Value, &st) != nil || st.Holder != "dc-a" || st.Ticket <= held.Ticket {
		t.Fatalf("states %d, %+v", len(recs), st)
	}
}

func TestReplayRebuildsTheSameTable(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t, 1, 0)
	c.offers(1, 0, 100)
	c.seal(1, 1)
	c.offers(2, 30, 130)
	c.seal(2, 2)
	c.stop()
	before := testkit.Table(t, c.brokers, topics.NumeratorTable)
	ctx := testkit.Context(t, 2*time.Minute)
	if err := numerator.Replay(ctx, c.cfg, 4, -1); err != nil {
		t.Fatal(err)
	}
	after := testkit.Table(t, c.brokers, topics.NumeratorTable)
	if len(before) != 130 || len(after) != len(before) {
		t.Fatalf("%d keys before the replay, %d after", len(before), len(after))
	}
	for k, v := range before {
		if string(after[k]) != string(v) {
			t.Fatalf("%s differs after the replay", k)
		}
	}
}

// TestRestartedNumeratorSeals: a numerator restarted on its local state,
// with nothing new to load, still sees that its table is caught up and
// seals (goka sets a view's input stats only for records it read itself).
func TestRestartedNumeratorSeals(t *testing.T) {
	c := newCluster(t, 1, 0)
	c.offers(1, 0, 40)
	testkit.Eventually(t, time.Minute, "generation 1 recorded", func() bool {
		return len(testkit.Table(t, c.brokers, topics.NumeratorTable)) == 40
	})
	c.stop()
	c.start()
	if st := c.seal(1, 1); st.Generation != 1 {
		t.Fatalf("state %+v", st)
	}
	if as := c.assignments(); len(as) != 40 {
		t.Fatalf("%d assignments, want 40", len(as))
	}
}

// TestAMasterKilledInItsBuildDoesNotStopTheNext: a master killed between
// its build's decisions and their commit leaves its transaction open on
// numerator.results, where the numerator group (reading committed records)
// stops; the next master, whatever its name, seals the next generation at
// once, not after the transaction's timeout. The chaos test found it with
// the master started again under its name: generations stopped sealing
// for its three minutes after a kill; a Deployment's new pod has another.
func TestAMasterKilledInItsBuildDoesNotStopTheNext(t *testing.T) {
	c := newStopped(t, 1, 0)
	c.cfg.Holder = "the-next-pod"
	dead, err := c.cfg.Streams.Cluster.Transactional("killed-sealer", numerator.TransactionalID,
		kgo.TransactionTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t, time.Minute)
	if err := dead.ProduceSync(ctx, &kgo.Record{Topic: topics.NumeratorResults, Key: []byte(key(0).String()),
		Value: []byte("a build's decision, never committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The killed master's client is never used again: its transaction
	// stays open until the broker's timeout or a fence.
	c.start()
	c.offers(1, 0, 40)
	if st := c.seal(1, 1); st.Generation != 1 {
		t.Fatalf("state %+v", st)
	}
	if as := c.assignments(); len(as) != 40 {
		t.Fatalf("%d assignments, want 40", len(as))
	}
}

// TestMarkerDeliveredAgainChangesNothing: a marker read again (its offset
// not committed before a crash) finds itself carried out in the last state:
// no second state, no dead letter, the next marker carried out as usual.
func TestMarkerDeliveredAgainChangesNothing(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.offers(1, 0, 30)
	first := c.seal(1, 1)
	if first.MarkerOffset != 0 || first.MarkerPartition != 0 {
		t.Fatalf("the state names marker %d/%d, want 0/0", first.MarkerPartition, first.MarkerOffset)
	}
	c.stop()
	// As if the commit of the marker's offset had been lost.
	adm := testkit.Admin(t, c.brokers)
	ctx := testkit.Context(t, time.Minute)
	var at kadm.Offsets
	at.Add(kadm.Offset{Topic: topics.NumeratorGenerations, Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, numerator.SealerGroup, at); err != nil {
		t.Fatal(err)
	}
	c.start()
	c.offers(2, 0, 35)
	if st := c.seal(2, 2); st.Generation != 2 || st.MarkerOffset != 1 {
		t.Fatalf("second state %+v", st)
	}
	if n := len(testkit.ReadAll(t, c.brokers, topics.NumeratorStates)); n != 2 {
		t.Errorf("%d states, want 2", n)
	}
	if dead := testkit.ReadAll(t, c.brokers, topics.NumeratorDead); len(dead) != 0 {
		t.Errorf("%d dead letters, want none", len(dead))
	}
}

// TestGarbageInTheTableIsDeadLettered: a value of the numerator table that
// does not decode, loaded by a numerator starting on an empty local state,
// is dead-lettered with the reason when its key is next seen and taken as
// absent; the numerator goes on and seals.
func TestGarbageInTheTableIsDeadLettered(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.offers(1, 0, 5)
	testkit.Eventually(t, time.Minute, "generation 1 recorded", func() bool {
		return len(testkit.Table(t, c.brokers, topics.NumeratorTable)) == 5
	})
	c.stop()
	testkit.Put(t, c.brokers, topics.NumeratorTable, []byte(key(0).String()), []byte("garbage"))
	c.cfg.Streams.StateDir = t.TempDir()
	c.start()
	c.offers(1, 0, 5)
	c.seal(1, 1)
	if as := c.assignments(); len(as) != 5 {
		t.Errorf("%d assignments, want 5", len(as))
	}
	var reasons []string
	for _, r := range testkit.ReadAll(t, c.brokers, topics.NumeratorDead) {
		var d schemas.DeadLetter
		if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, d.Topic+": "+d.Reason)
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], string(topics.NumeratorTable)+": undecodable table value") {
		t.Errorf("dead letters %q, want the table value's", reasons)
	}
}

// TestLateOffersDoNotChangeASeal: offers of generation 2 applied before
// generation 1 is sealed (sent right after its marker) do not make the keys
// of generation 1 lose their ids in it.
func TestLateOffersDoNotChangeASeal(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.offers(1, 0, 20)
	c.offers(2, 0, 25)
	testkit.Eventually(t, time.Minute, "generation 2 recorded", func() bool {
		seen := 0
		for _, v := range testkit.Table(t, c.brokers, topics.NumeratorTable) {
			var e schemas.NumeratorEntry
			if schemas.NumeratorEntries.Decode(v, &e) == nil && e.LastSeen == 2 {
				seen++
			}
		}
		return seen == 25
	})
	if st := c.seal(1, 1); st.Generation != 1 {
		t.Fatalf("state %+v", st)
	}
	first := c.assignments()
	if len(first) != 20 {
		t.Fatalf("%d keys numbered in generation 1, want its 20", len(first))
	}
	c.seal(2, 2)
	all := c.assignments()
	if len(all) != 25 {
		t.Fatalf("%d keys numbered after generation 2, want 25", len(all))
	}
	for k, p := range first {
		if all[k] != p {
			t.Errorf("%s: %v in generation 1, %v after 2", k, p, all[k])
		}
	}
	checkUnique(t, all)
}

// TestHoldLockProcess is not a test of its own: it is a master that takes
// the write lock and hangs, for TestKilledMastersLockGoesWithItsSession to
// kill.
func TestHoldLockProcess(t *testing.T) {
	addr := os.Getenv("OFFERLOG_TEST_ZOOKEEPER")
	if addr == "" {
		t.Skip("runs only as the process TestKilledMastersLockGoesWithItsSession kills")
	}
	ctx := context.Background()
	zk, err := coordinator.DialZooKeeper(ctx, addr, "/offerlog/numerator/0", 2*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zk.Acquire(ctx, "dc-dead", time.Hour); err != nil {
		t.Fatal(err)
	}
	select {} // until killed, the lock held for an hour
}

// TestKilledMastersLockGoesWithItsSession: a master killed while it holds
// the write lock (for an hour) does not hold up the next seal for its lock's
// timeout: the lock goes when its ZooKeeper session expires (2 s here), and
// the successor seals.
func TestKilledMastersLockGoesWithItsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	zkAddr := testkit.ZooKeeper(t)
	ctx := testkit.Context(t, 2*time.Minute)
	watch, err := coordinator.DialZooKeeper(ctx, zkAddr, "/offerlog/numerator/0", 0, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Close)
	kill := testkit.Child(t, "TestHoldLockProcess", "OFFERLOG_TEST_ZOOKEEPER="+zkAddr)
	testkit.Eventually(t, time.Minute, "the other master holds the lock", func() bool {
		l, ok, err := watch.Current(ctx)
		return err == nil && ok && l.Holder == "dc-dead"
	})

	c := newStopped(t, 10, 0)
	succ, err := coordinator.DialZooKeeper(ctx, zkAddr, "/offerlog/numerator/0", 2*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(succ.Close)
	c.cfg.Coordinator, c.cfg.Holder = succ, "dc-a"
	c.start()
	c.offers(1, 0, 20)
	kill()
	killed := time.Now()
	st := c.seal(1, 1)
	// The figure for docs/RELIABILITY.md; the bound is the session (2 s)
	// plus the sealer's retry interval, far below the lock's hour.
	t.Logf("sealed %s after the master holding the lock was killed", time.Since(killed).Round(100*time.Millisecond))
	if st.Holder != "dc-a" || st.Generation != 1 {
		t.Fatalf("state %+v", st)
	}
}

// twoDataCentres starts two clusters, "dc-a" and "dc-b", each with its
// own Kafka cluster and numerator, sharing one ZooKeeper.
func twoDataCentres(t *testing.T) (a, b *cluster) {
	t.Helper()
	a, b, _ = twoDataCentresWith(t, nil)
	return a, b
}

// twoDataCentresWith is twoDataCentres with configure called on both
// configurations before they start; it also returns ZooKeeper's address.
func twoDataCentresWith(t *testing.T, configure func(a, b *numerator.Config)) (a, b *cluster, zkAddr string) {
	t.Helper()
	zkAddr = testkit.ZooKeeper(t)
	a, b = newStopped(t, 10, 0), newStopped(t, 10, 0)
	a.cfg.Coordinator, a.cfg.Holder, a.cfg.Cluster = dialCoordinator(t, zkAddr), "dc-a", strings.Join(a.brokers, ",")
	b.cfg.Coordinator, b.cfg.Holder, b.cfg.Cluster = dialCoordinator(t, zkAddr), "dc-b", strings.Join(b.brokers, ",")
	if configure != nil {
		configure(&a.cfg, &b.cfg)
	}
	a.start()
	b.start()
	return a, b, zkAddr
}

// TestMasterAdoptsTheNewestStateOfAnotherCluster: two data centres, each
// with its Kafka cluster and numerator, share ZooKeeper. DC A seals
// generation 1; DC B, asked to seal generation 2, finds the pointer at A's
// state, copies it and A's decisions, and builds on them: the keys A
// numbered keep their ids, new keys get ids after them.
func TestMasterAdoptsTheNewestStateOfAnotherCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	a, b := twoDataCentres(t)
	a.offers(1, 0, 20)
	a.seal(1, 1)
	b.offers(2, 10, 30)
	st := b.seal(2, 2) // the adopted state, then B's own
	if st.Generation != 2 || st.Holder != "dc-b" {
		t.Fatalf("B's state %+v", st)
	}
	fromA, fromB := a.assignments(), b.assignments()
	for i := 10; i < 20; i++ {
		k := key(i).String()
		if fromB[k] != fromA[k] {
			t.Errorf("key %d: id %v in B, %v given by A", i, fromB[k], fromA[k])
		}
	}
	checkUnique(t, fromB)
	if len(fromB) != 30 {
		t.Errorf("B holds %d keys, want A's 20 and its 10 new", len(fromB))
	}
}

// TestAdoptionReadsTheDurableAssignments: DC B, asked to seal long after DC
// A's states (A's numerator.results no longer holds their decisions),
// adopts A's newest state from A's compacted numerator.assignments: the
// keys A numbered keep their ids in B, and B's new keys come after them.
func TestAdoptionReadsTheDurableAssignments(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	a, b := twoDataCentres(t)
	a.offers(1, 0, 20)
	a.seal(1, 1)
	a.offers(2, 0, 30)
	a.seal(2, 2)
	// A's decisions are gone from numerator.results (past its retention).
	ctx := testkit.Context(t, time.Minute)
	adm := testkit.Admin(t, a.brokers)
	ends, err := adm.ListEndOffsets(ctx, topics.NumeratorResults)
	if err != nil {
		t.Fatal(err)
	}
	var del kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) {
		del.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	if n := len(testkit.ReadAll(t, a.brokers, topics.NumeratorResults)); n != 0 {
		t.Fatalf("%d decisions left on A's numerator.results", n)
	}
	b.offers(3, 0, 40)
	st := b.seal(3, 2) // the adopted state, then B's own
	if st.Generation != 3 || st.Holder != "dc-b" {
		t.Fatalf("B's state %+v", st)
	}
	fromA, fromB := a.assignments(), b.assignments()
	for i := range 30 {
		k := key(i).String()
		if fromB[k] != fromA[k] {
			t.Errorf("key %d: id %v in B, %v given by A", i, fromB[k], fromA[k])
		}
	}
	checkUnique(t, fromB)
	if len(fromB) != 40 {
		t.Errorf("B holds %d keys, want A's 30 and its 10 new", len(fromB))
	}
}

// dialCoordinator returns a coordinator of type 0's numerator in the
// ZooKeeper at zkAddr, closed when the test ends.
func dialCoordinator(t *testing.T, zkAddr string) *coordinator.ZooKeeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zk, err := coordinator.DialZooKeeper(ctx, zkAddr, "/offerlog/numerator/0", 0, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zk.Close)
	return zk
}

// TestNumeratorMasterProcess is a numerator master in a process of its own,
// for the tests that SIGSTOP it: master dc-child with the coordinator in
// ZooKeeper (a static member named OFFERLOG_TEST_MASTER_INSTANCE of its
// groups, if set), which, the first time its sealer reaches the point
// OFFERLOG_TEST_MASTER_PAUSE_AT (default built: a build written, not
// reported), writes its ticket to the file OFFERLOG_TEST_MASTER_BUILT and
// waits for the file OFFERLOG_TEST_MASTER_RESUME; the first time it
// reaches OFFERLOG_TEST_MASTER_NOTE_AT, if set, it writes the file
// OFFERLOG_TEST_MASTER_NOTE. With OFFERLOG_TEST_MASTER_RESUME_LOST=1 it
// goes on from the pause only once it has lost its partition too (the
// handler's context ended).
func TestNumeratorMasterProcess(t *testing.T) {
	brokers := os.Getenv("OFFERLOG_TEST_MASTER_BROKERS")
	if brokers == "" {
		t.Skip("runs only as the process the SIGSTOP tests pause")
	}
	lock, err := time.ParseDuration(os.Getenv("OFFERLOG_TEST_MASTER_LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	built, resume := os.Getenv("OFFERLOG_TEST_MASTER_BUILT"), os.Getenv("OFFERLOG_TEST_MASTER_RESUME")
	pauseAt := numerator.Point(cmp.Or(os.Getenv("OFFERLOG_TEST_MASTER_PAUSE_AT"), string(numerator.Built)))
	noteAt, note := numerator.Point(os.Getenv("OFFERLOG_TEST_MASTER_NOTE_AT")), os.Getenv("OFFERLOG_TEST_MASTER_NOTE")
	cfg := testConfig(t, strings.Split(brokers, ","), os.Getenv("OFFERLOG_TEST_MASTER_STATE"), 10, 0)
	cfg.Coordinator, cfg.Holder, cfg.Cluster = dialCoordinator(t, os.Getenv("OFFERLOG_TEST_MASTER_ZK")), "dc-child", brokers
	if id := os.Getenv("OFFERLOG_TEST_MASTER_INSTANCE"); id != "" {
		// A static member, which the parent finds in the group by its name.
		kafka, err := streams.NewCluster(strings.Split(brokers, ","), nil, streams.ClientSettings{InstanceID: id})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Streams.Cluster = kafka
	}
	cfg.LockTimeout = lock
	paused, noted, lost := false, false, os.Getenv("OFFERLOG_TEST_MASTER_RESUME_LOST") == "1"
	cfg.Hook = func(ctx context.Context, at numerator.Point, ticket int64) {
		if at == noteAt && !noted {
			noted = true
			if err := os.WriteFile(note, []byte(fmt.Sprint(ticket)), 0o644); err != nil {
				t.Error(err)
			}
		}
		if at != pauseAt || paused {
			return
		}
		paused = true
		if err := os.WriteFile(built, []byte(fmt.Sprint(ticket)), 0o644); err != nil {
			t.Error(err)
		}
		for lost || ctx.Err() == nil {
			if _, err := os.Stat(resume); err == nil && (!lost || ctx.Err() != nil) {
				return
			}
			time.Sleep(10 * time.Millisecond) // polls for the file: the parent's go-ahead
		}
	}
	err = numerator.Run(context.Background(), cfg)
	t.Fatalf("the numerator returned before it was killed: %v", err)
}

// pausedMaster starts TestNumeratorMasterProcess on c with lock, sends it
// a seal of generation 1 of 20 keys, waits for its build to be written and
// SIGSTOPs it. It returns its first ticket, a function that lets it report
// and SIGCONTs it, and the coordinator of another master, dc-b.
func pausedMaster(t *testing.T, lock time.Duration) (c *cluster, ticket int64, resume func(), other *coordinator.ZooKeeper) {
	c, ticket, resume, zkAddr := pausedMasterAt(t, lock, numerator.Built, "", "")
	return c, ticket, resume, dialCoordinator(t, zkAddr)
}

// pausedMasterAt is pausedMaster with the child paused at the point
// pauseAt, noting the point noteAt in the file note; it returns
// ZooKeeper's address.
func pausedMasterAt(t *testing.T, lock time.Duration, pauseAt, noteAt numerator.Point, note string, env ...string) (c *cluster, ticket int64, resume func(), zkAddr string) {
	zkAddr = testkit.ZooKeeper(t)
	c = newStopped(t, 10, 0)
	dir := t.TempDir()
	built, goAhead := filepath.Join(dir, "built"), filepath.Join(dir, "resume")
	env = append([]string{"OFFERLOG_TEST_MASTER_BROKERS=" + strings.Join(c.brokers, ","),
		"OFFERLOG_TEST_MASTER_STATE=" + c.cfg.Streams.StateDir, "OFFERLOG_TEST_MASTER_ZK=" + zkAddr, "OFFERLOG_TEST_MASTER_LOCK=" + lock.String(),
		"OFFERLOG_TEST_MASTER_BUILT=" + built, "OFFERLOG_TEST_MASTER_RESUME=" + goAhead, "OFFERLOG_TEST_MASTER_PAUSE_AT=" + string(pauseAt),
		"OFFERLOG_TEST_MASTER_NOTE_AT=" + string(noteAt), "OFFERLOG_TEST_MASTER_NOTE=" + note}, env...)
	proc, kill := testkit.ChildProcess(t, "TestNumeratorMasterProcess", env...)
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT); kill() })
	c.offers(1, 0, 20)
	data, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: 1, Scheme: -1})
	c.produce(&kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: data})
	var text []byte
	testkit.Eventually(t, 2*time.Minute, "the child's build written", func() bool {
		var err error
		text, err = os.ReadFile(built)
		return err == nil && len(text) > 0
	})
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ticket, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	resume = func() {
		if err := os.WriteFile(goAhead, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	return c, ticket, resume, zkAddr
}

// TestAMasterStoppedPastItsLockChangesNothing: a master SIGSTOPped past its
// lock's timeout while another master takes the lock and seals is refused
// when it resumes: nothing of its build is applied, numerator.states says
// it was invalid, and its next build, under a new ticket, is the one.
func TestAMasterStoppedPastItsLockChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c, ticket, resume, other := pausedMaster(t, 2*time.Second)
	ctx := testkit.Context(t, 3*time.Minute)
	var lb coordinator.Lock
	testkit.Eventually(t, time.Minute, "dc-b takes the stopped master's timed-out lock", func() bool {
		var err error
		lb, err = other.Acquire(ctx, "dc-b", time.Minute)
		return err == nil
	})
	if err := other.Report(ctx, lb.Ticket, &coordinator.Pointer{Version: "0.0.0.1", Cluster: strings.Join(c.brokers, ","),
		Topic: topics.NumeratorStates, Offsets: map[int32]int64{0: 0}}); err != nil {
		t.Fatal(err)
	}
	if as := c.assignments(); len(as) != 0 {
		t.Fatalf("%d assignments of the stopped master's build", len(as))
	}
	resume()
	var bad, good schemas.NumeratorState
	testkit.Eventually(t, 2*time.Minute, "the refused build recorded and the next one written", func() bool {
		bad, good = schemas.NumeratorState{}, schemas.NumeratorState{}
		for _, r := range testkit.ReadAll(t, c.brokers, topics.NumeratorStates) {
			var st schemas.NumeratorState
			if schemas.NumeratorStates.Decode(r.Value, &st) == nil {
				if st.Invalid != "" {
					bad = st
				} else {
					good = st
				}
			}
		}
		return bad.Ticket != 0 && good.Ticket != 0
	})
	if bad.Ticket != ticket || good.Ticket <= lb.Ticket || good.Holder != "dc-child" {
		t.Errorf("refused %+v, written %+v; want the first ticket %d refused and one after %d written", bad, good, ticket, lb.Ticket)
	}
	testkit.Eventually(t, time.Minute, "results applied", c.applied)
	if n := len(testkit.ReadAll(t, c.brokers, topics.NumeratorResults)); n != 20 {
		t.Errorf("%d committed decisions, want the 20 of the valid build", n)
	}
}

// TestAMasterStoppedBrieflyFinishesAndTheNextSeals: a master SIGSTOPped
// for less than its lock's timeout and its ZooKeeper session while it holds
// the lock finishes its build once resumed, and the other master, refused
// meanwhile, has the lock at once after it (issue 32 saw both wait for
// minutes).
func TestAMasterStoppedBrieflyFinishesAndTheNextSeals(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c, ticket, resume, other := pausedMaster(t, time.Minute)
	ctx := testkit.Context(t, 3*time.Minute)
	if _, err := other.Acquire(ctx, "dc-b", time.Minute); !errors.Is(err, coordinator.ErrLocked) {
		t.Fatalf("dc-b while the stopped master holds the lock: %v, want ErrLocked", err)
	}
	time.Sleep(3 * time.Second) // the pause itself, shorter than the 10 s session
	resume()
	resumed := time.Now()
	var lb coordinator.Lock
	testkit.Eventually(t, time.Minute, "dc-b gets the lock", func() bool {
		var err error
		lb, err = other.Acquire(ctx, "dc-b", time.Minute)
		return err == nil
	})
	t.Logf("dc-b had the lock %s after the stopped master resumed", time.Since(resumed).Round(10*time.Millisecond))
	if p, ok, err := other.State(ctx); err != nil || !ok || p.Ticket != ticket || p.Holder != "dc-child" {
		t.Fatalf("the pointer %+v (%v %v), want the resumed master's build under ticket %d", p, ok, err, ticket)
	}
	if err := other.Report(ctx, lb.Ticket, nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "results applied", c.applied)
	if as := c.assignments(); len(as) != 20 {
		t.Errorf("%d assignments, want 20", len(as))
	}
}

// TestGGrowsWithNewDocIDsOnly: the seed's G grows when a seal adds doc_ids,
// not with the operator's generation (kept beside it); the state remembers
// the G of its last reuse of a freed doc_id, and data older than it is not
// usable with it (stricter than the seed: the data may name a reused id
// for its former key).
func TestGGrowsWithNewDocIDsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t, 1, 0) // a key not seen in the next generation loses its id
	c.offers(1, 0, 10)
	st1 := c.seal(1, 1)
	c.offers(2, 0, 5)
	st2 := c.seal(2, 2) // 5 ids freed, none given
	c.offers(3, 0, 5)
	c.offers(3, 10, 15)
	st3 := c.seal(3, 3) // the 5 freed ids given to new keys
	c.offers(4, 0, 5)
	c.offers(4, 10, 20)
	st4 := c.seal(4, 4) // 5 more new keys: in these keys' shards, some take an id freed at 2 too
	for i, c := range []struct {
		st          schemas.NumeratorState
		version     string
		gen, reused int64
	}{{st1, "0.0.0.1", 1, 0}, {st2, "0.0.0.1", 2, 0}, {st3, "0.0.0.2", 3, 2}, {st4, "0.0.0.3", 4, 3}} {
		if c.st.Version != c.version || c.st.Generation != c.gen || c.st.LastReuse != c.reused {
			t.Errorf("state %d: %s generation %d last reuse %d, want %s, %d, %d", i+1, c.st.Version, c.st.Generation, c.st.LastReuse, c.version, c.gen, c.reused)
		}
	}
	g := func(s string) numerator.Version {
		v, err := numerator.ParseVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := numerator.Compatible(g("0.0.0.1"), g(st4.Version)); err != nil {
		t.Errorf("the seed's rule: %v", err)
	}
	if err := numerator.CompatibleWith(g("0.0.0.1"), &st4); err == nil || !strings.Contains(err.Error(), "gave doc_ids other keys held") {
		t.Errorf("data of G 1 with a state that reused ids at G 2: %v", err)
	}
	if err := numerator.CompatibleWith(g("0.0.0.2"), &st3); err != nil {
		t.Errorf("data of G 2 with its own state: %v", err)
	}
	if err := numerator.CompatibleWith(g("0.0.0.3"), &st4); err != nil {
		t.Errorf("data of G 3 with its own state: %v", err)
	}
	if err := numerator.CompatibleWith(g("0.0.0.2"), &st4); err == nil {
		t.Error("data of G 2 with a state that reused ids at G 3: usable")
	}
	checkUnique(t, c.assignments())
}

// lossyReports is a coordinator whose next successful report is taken and
// its answer lost (the connection dropped after ZooKeeper applied it).
type lossyReports struct {
	coordinator.Coordinator
	lose    atomic.Bool
	reports atomic.Int32
}

func (l *lossyReports) Report(ctx context.Context, ticket int64, p *coordinator.Pointer) error {
	err := l.Coordinator.Report(ctx, ticket, p)
	l.reports.Add(1)
	if err == nil && p != nil && l.lose.CompareAndSwap(true, false) {
		return fmt.Errorf("zk: connection closed before the answer: %w", context.DeadlineExceeded)
	}
	return err
}

// TestAReportWhoseAnswerIsLostIsCommitted: the coordinator takes the
// report of a build and its answer is lost. The sealer asks the pointer,
// finds its build there, and commits it: the pointer never names a state
// that is not on the log (it aborted, and built again under a new ticket
// while the pointer named the aborted one).
func TestAReportWhoseAnswerIsLostIsCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newStopped(t, 10, 0)
	lossy := &lossyReports{Coordinator: c.cfg.Coordinator}
	lossy.lose.Store(true)
	c.cfg.Coordinator = lossy
	c.start()
	c.offers(1, 0, 20)
	st := c.seal(1, 1)
	if n := lossy.reports.Load(); n != 1 {
		t.Errorf("%d reports: the build whose report was taken was aborted and built again", n)
	}
	p, ok, err := lossy.State(testkit.Context(t, 10*time.Second))
	if err != nil || !ok || p.Version != st.Version || p.Ticket != st.Ticket {
		t.Errorf("the pointer %+v (%v %v) names another state than the log's %s (ticket %d)", p, ok, err, st.Version, st.Ticket)
	}
	if n := len(c.assignments()); n != 20 {
		t.Errorf("%d keys numbered, want 20", n)
	}
}

// states returns every record of c's numerator.states.
func (c *cluster) states() []schemas.NumeratorState {
	c.t.Helper()
	var out []schemas.NumeratorState
	for _, r := range testkit.ReadAll(c.t, c.brokers, topics.NumeratorStates) {
		var st schemas.NumeratorState
		if err := schemas.NumeratorStates.Decode(r.Value, &st); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, st)
	}
	return out
}

// TestAHandoverThatCannotCompleteIsDeclaredInvalid: dc-a's master reports
// a state and dies before committing it (the pointer names a state that is
// not on dc-a's log). dc-b's next seal cannot adopt it, and once its
// handover timeout has passed declares it invalid (the seed: the master
// that built the last state hands it over, otherwise its data is declared
// invalid): a record on dc-b's numerator.states says why, the metric
// counts it, and dc-b seals from its own state, with a rebuild version past
// the invalid state's, so that data built on that state is refused. It
// retried for ever before.
func TestAHandoverThatCannotCompleteIsDeclaredInvalid(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	reg := metrics.New()
	a, b, zkAddr := twoDataCentresWith(t, func(_, b *numerator.Config) {
		b.HandoverTimeout, b.Metrics = 2*time.Second, numerator.NewMetrics(reg)
	})
	a.offers(1, 0, 20)
	a.seal(1, 1)
	// dc-a's next master reports 0.0.0.2 and dies before its commit.
	zk := dialCoordinator(t, zkAddr)
	ctx := testkit.Context(t, 3*time.Minute)
	lock, err := zk.Acquire(ctx, "dc-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := zk.Report(ctx, lock.Ticket, &coordinator.Pointer{Version: "0.0.0.2", Cluster: a.cfg.Cluster,
		Topic: topics.NumeratorStates, Offsets: map[int32]int64{0: 1}}); err != nil {
		t.Fatal(err)
	}
	b.offers(2, 10, 30)
	st := b.seal(2, 2) // the invalid record, then dc-b's own state
	sts := b.states()
	if bad := sts[0]; bad.Version != "0.0.0.2" || bad.Ticket != lock.Ticket || !strings.Contains(bad.Invalid, "not handed over within 2s") ||
		!strings.Contains(bad.Invalid, a.cfg.Cluster) {
		t.Errorf("dc-b's first record %+v: want 0.0.0.2 of ticket %d declared invalid, naming dc-a's cluster", bad, lock.Ticket)
	}
	if st.Holder != "dc-b" || st.Version != "0.0.1.1" || st.Invalid != "" {
		t.Errorf("dc-b's state %+v: want 0.0.1.1 by dc-b (its own numbering, a rebuild version past the invalid state's)", st)
	}
	if err := numerator.CompatibleWith(numerator.Version{G: 2}, &st); err == nil {
		t.Error("data built on the invalid state 0.0.0.2 is usable with dc-b's state")
	}
	p, ok, err := zk.State(ctx)
	if err != nil || !ok || p.Cluster != b.cfg.Cluster || p.Version != st.Version || len(p.Invalidated) != 1 || p.Invalidated[0].Version != "0.0.0.2" {
		t.Errorf("the pointer %+v (%v %v): want dc-b's %s, carrying the invalidation of 0.0.0.2", p, ok, err, st.Version)
	}
	if n := len(b.assignments()); n != 20 {
		t.Errorf("dc-b numbers %d keys, want its own 20", n)
	}
	checkDense(t, b.assignments())
	var text strings.Builder
	reg.Write(&text)
	if !strings.Contains(text.String(), "offerlog_numerator_states_invalidated_total 1") {
		t.Errorf("the metric does not count the invalid state:\n%s", text.String())
	}
}

// TestAMasterWhoseStateWasDeclaredInvalidAdoptsTheOtherWhole: an operator
// of dc-b declares dc-a's state invalid (dc-a is taken for gone:
// numerator.Invalidate, offerlog numerator invalidate) and dc-b seals on
// its own numbering. When dc-a comes back, its own state is the invalid
// one: it adopts dc-b's state whole (its keys that dc-b does not number
// lose their ids) and seals on it: every key both number has dc-b's id.
func TestAMasterWhoseStateWasDeclaredInvalidAdoptsTheOtherWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	a, b, zkAddr := twoDataCentresWith(t, nil)
	a.offers(1, 0, 20)
	a.seal(1, 1)
	ctx := testkit.Context(t, 3*time.Minute)
	op := numerator.Operator{Kafka: b.cfg.Streams.Cluster, Cluster: b.cfg.Cluster, Coordinator: dialCoordinator(t, zkAddr),
		Holder: "operator", Logger: testkit.Logger()}
	if _, err := numerator.Invalidate(ctx, op, "0.0.0.5", "dc-a is gone", true); err == nil {
		t.Error("invalidate of another version than the pointer's: no error")
	}
	if _, err := numerator.Reset(ctx, op, "", true); err == nil {
		t.Error("reset of a cluster that holds no state: no error")
	}
	move, err := numerator.Invalidate(ctx, op, "0.0.0.1", "dc-a is gone", true)
	if err != nil {
		t.Fatal(err)
	}
	if move.After.Cluster != "" || len(move.After.Invalidated) != 1 {
		t.Errorf("the pointer after %+v: want no state (dc-b had none), carrying the invalidation", move.After)
	}
	b.offers(2, 10, 30)
	stB := b.seal(2, 2) // the invalid record, then dc-b's own state
	if stB.Version != "0.0.1.1" {
		t.Errorf("dc-b's state %s, want 0.0.1.1", stB.Version)
	}
	a.offers(3, 0, 30)
	// dc-a: its state, its invalid record, the adopted state, its own.
	stA := a.seal(3, 4)
	sts := a.states()
	if sts[1].Version != "0.0.0.1" || !strings.Contains(sts[1].Invalid, "declared invalid by operator") || sts[2].Version != stB.Version {
		t.Errorf("dc-a's states %+v: want 0.0.0.1 declared invalid by the operator, then dc-b's %s adopted", sts, stB.Version)
	}
	if stA.Holder != "dc-a" || stA.Generation != 3 || !strings.HasPrefix(stA.Version, "0.0.1.") {
		t.Errorf("dc-a's state %+v: want generation 3 on dc-b's rebuild version 1", stA)
	}
	fromA, fromB := a.assignments(), b.assignments()
	for i := 10; i < 30; i++ {
		if k := key(i).String(); fromA[k] != fromB[k] {
			t.Errorf("key %d: id %v in dc-a, %v given by dc-b", i, fromA[k], fromB[k])
		}
	}
	checkDense(t, fromA)
	if len(fromA) != 30 {
		t.Errorf("dc-a numbers %d keys, want 30", len(fromA))
	}
}

// nextMaster configures c's numerator as a second master of c's cluster,
// dc-next, on the ZooKeeper at zkAddr; its sealer sends on points each
// point it reaches with its ticket, and at the point wait, the first time,
// waits for go to close.
func nextMaster(t *testing.T, c *cluster, zkAddr string, wait numerator.Point, goAhead <-chan struct{}) <-chan pointReached {
	points := make(chan pointReached, 64)
	waited := false
	c.cfg.Coordinator, c.cfg.Holder, c.cfg.Cluster = dialCoordinator(t, zkAddr), "dc-next", strings.Join(c.brokers, ",")
	c.cfg.LockTimeout, c.cfg.Streams.StateDir = time.Minute, t.TempDir() // the paused master's process holds c's
	c.cfg.Hook = func(ctx context.Context, at numerator.Point, ticket int64) {
		select {
		case points <- pointReached{at, ticket}:
		default:
		}
		if at == wait && !waited {
			waited = true
			select {
			case <-goAhead:
			case <-ctx.Done():
			}
		}
	}
	return points
}

type pointReached struct {
	at     numerator.Point
	ticket int64
}

// reach waits for the point at on points and returns its ticket.
func reach(t *testing.T, points <-chan pointReached, at numerator.Point) int64 {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case p := <-points:
			if p.at == at {
				return p.ticket
			}
		case <-deadline:
			t.Fatalf("the master never reached %s", at)
		}
	}
}

// validStates returns c's valid states of generation g.
func (c *cluster) validStates(g int64) []schemas.NumeratorState {
	var out []schemas.NumeratorState
	for _, st := range c.states() {
		if st.Invalid == "" && st.Generation == g {
			out = append(out, st)
		}
	}
	return out
}

// TestAStaleMasterResumingDoesNotAbortTheNextOnesBuild: two real sealers of
// one cluster over ZooKeeper. The first takes the write lock and stops
// before it fences anything, past its lock's timeout; the second takes
// the lock and writes its build. The first then goes on and fences: only
// builds of tickets before its own, never the second's (fencing follows
// the tickets' order: a transactional id a ticket). The second's report is
// accepted and its build commits: the state of generation 1 is its first
// build's. With one transactional id for every master, the first's fence
// aborted the second's open build.
//
// numerator.generations has two partitions here, the masters one each, so
// that the first stops inside its handler without losing its partition:
// a master stopped past its session (SIGSTOP) loses it and its handler's
// context, and fences first only if it runs before it learns so, a race
// this makes certain.
func TestAStaleMasterResumingDoesNotAbortTheNextOnesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	zkAddr := testkit.ZooKeeper(t)
	c := newStopped(t, 10, 0)
	ctx := testkit.Context(t, 3*time.Minute)
	if _, err := testkit.Admin(t, c.brokers).UpdatePartitions(ctx, 2, topics.NumeratorGenerations); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	locked, goAhead, fenced := filepath.Join(dir, "locked"), filepath.Join(dir, "resume"), filepath.Join(dir, "fenced")
	_, kill := testkit.ChildProcess(t, "TestNumeratorMasterProcess", "OFFERLOG_TEST_MASTER_BROKERS="+strings.Join(c.brokers, ","),
		"OFFERLOG_TEST_MASTER_STATE="+c.cfg.Streams.StateDir, "OFFERLOG_TEST_MASTER_ZK="+zkAddr, "OFFERLOG_TEST_MASTER_LOCK=2s",
		"OFFERLOG_TEST_MASTER_BUILT="+locked, "OFFERLOG_TEST_MASTER_RESUME="+goAhead, "OFFERLOG_TEST_MASTER_PAUSE_AT="+string(numerator.Locked),
		"OFFERLOG_TEST_MASTER_NOTE_AT="+string(numerator.Fenced), "OFFERLOG_TEST_MASTER_NOTE="+fenced, "OFFERLOG_TEST_MASTER_INSTANCE=first-master")
	t.Cleanup(kill)
	release := make(chan struct{})
	points := nextMaster(t, c, zkAddr, numerator.Built, release)
	c.start()
	c.offers(1, 0, 20)
	// The partition of each master, once each holds one.
	adm := testkit.Admin(t, c.brokers)
	var mine, theirs int32
	testkit.Eventually(t, time.Minute, "each master holds a partition of numerator.generations", func() bool {
		groups, err := adm.DescribeGroups(ctx, numerator.SealerGroup)
		g := groups[numerator.SealerGroup]
		if err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 1 {
				return false
			}
			if m.InstanceID != nil && *m.InstanceID == "first-master" {
				mine = a.Topics[0].Partitions[0]
			} else {
				theirs = a.Topics[0].Partitions[0]
			}
		}
		return mine != theirs
	})
	marker := func(partition int32) {
		data, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: 1, Scheme: -1})
		cl := testkit.Client(t, c.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.NumeratorGenerations, Partition: partition, Key: []byte("numerator"), Value: data}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	marker(mine)
	var first int64
	testkit.Eventually(t, 2*time.Minute, "the first master holds the lock", func() bool {
		text, err := os.ReadFile(locked)
		first, _ = strconv.ParseInt(string(text), 10, 64)
		return err == nil && first > 0
	})
	marker(theirs)
	second := reach(t, points, numerator.Built)
	if second <= first {
		t.Fatalf("the second master's ticket %d is not after the first's %d", second, first)
	}
	if err := os.WriteFile(goAhead, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the first master fenced", func() bool {
		_, err := os.Stat(fenced)
		return err == nil
	})
	close(release)
	c.sealedOnceBy(t, zkAddr, second, "dc-next")
}

// TestABuildReportedIsNotAbortedByTheNextMaster: two real sealers of one
// cluster over ZooKeeper. The first's report is accepted and it is paused
// (SIGSTOP) before it commits; the second takes the partition and the lock
// and fences the builds after the last accepted report only: the first's
// build stays open, the second waits for it, and once the first resumes
// (and learns it lost the partition: its handler's context ended) its
// build commits, the state the pointer names. With one transactional id
// for every master, the second aborted it: the pointer named a state that
// was never on the log, and the second built generation 1 again.
func TestABuildReportedIsNotAbortedByTheNextMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c, first, resume, zkAddr := pausedMasterAt(t, time.Minute, numerator.Reported, "", "", "OFFERLOG_TEST_MASTER_RESUME_LOST=1")
	points := nextMaster(t, c, zkAddr, "", nil)
	c.start()
	if second := reach(t, points, numerator.Fenced); second <= first {
		t.Fatalf("the second master's ticket %d is not after the first's %d", second, first)
	}
	resume()
	c.sealedOnceBy(t, zkAddr, first, "dc-child")
}

// sealedOnceBy waits for c's state of generation 1 and its decisions
// applied, and checks that it is one state, built under ticket by holder,
// that the pointer in the ZooKeeper at zkAddr names it, and that it
// numbers the 20 keys of pausedMasterAt.
func (c *cluster) sealedOnceBy(t *testing.T, zkAddr string, ticket int64, holder string) {
	t.Helper()
	testkit.Eventually(t, 2*time.Minute, "a state of generation 1", func() bool { return len(c.validStates(1)) > 0 })
	testkit.Eventually(t, time.Minute, "results applied", c.applied)
	sts := c.validStates(1)
	if len(sts) != 1 || sts[0].Ticket != ticket || sts[0].Holder != holder {
		t.Fatalf("states of generation 1 %+v: want one, the build of ticket %d by %s", sts, ticket, holder)
	}
	p, ok, err := dialCoordinator(t, zkAddr).State(testkit.Context(t, 10*time.Second))
	if err != nil || !ok || p.Ticket != ticket || p.Version != sts[0].Version {
		t.Errorf("the pointer %+v (%v %v): want the state of ticket %d", p, ok, err, ticket)
	}
	if n := len(c.assignments()); n != 20 {
		t.Errorf("%d keys numbered, want 20", n)
	}
}

// TestAnOlderStatesMappingIsLookedUp: the seed's "pick the needed state
// among several stored". Keys 10-19 expire at generation 2 (TTL 1) and
// generation 3's new keys take their ids (a version is a state's: G grows
// with new ids, so a seal of expiries alone keeps its version, and a
// version names its newest state); each state still answers what it
// gave each key (numerator.Lookup, from the history numerator.assignments
// carries), though the compacted topic holds each key's current
// assignment alone.
func TestAnOlderStatesMappingIsLookedUp(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t, 1, 0)
	c.offers(1, 0, 20)
	st1 := c.seal(1, 1)
	at1 := c.assignments()
	c.offers(2, 0, 10)
	c.offers(2, 40, 45) // new ids: generation 2's state is another version (G grows)
	c.seal(2, 2)
	c.offers(3, 20, 30)
	st3 := c.seal(3, 3)
	at3 := c.assignments()
	kafka := testkit.Cluster(t, c.brokers)
	ctx := testkit.Context(t, time.Minute)
	// A key of generation 1 that expired, and the key of generation 3
	// that took its id.
	var gone, took string
	for i := 10; i < 20 && took == ""; i++ {
		for j := 20; j < 30; j++ {
			if at3[key(j).String()] == at1[key(i).String()] {
				gone, took = key(i).String(), key(j).String()
				break
			}
		}
	}
	if took == "" {
		t.Fatal("no key of generation 3 took an expired key's id: the test shows nothing")
	}
	keys := []string{key(5).String(), gone, took}
	for _, want := range []struct {
		state string
		got   []placed
	}{
		{st1.Version, []placed{at1[keys[0]], at1[keys[1]], {-1, numerator.NoDocID}}},
		{st3.Version, []placed{at3[keys[0]], at3[keys[1]], at3[keys[2]]}},
	} {
		looked, err := numerator.Lookup(ctx, kafka, want.state, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range looked {
			if got := (placed{l.Shard, l.DocID}); l.Err != nil || got != want.got[i] || l.State != want.state {
				t.Errorf("state %s, key %s: %+v, want %v", want.state, keys[i], l, want.got[i])
			}
		}
	}
	if at3[gone].doc != numerator.NoDocID {
		t.Errorf("%s holds %v at generation 3, want its id expired", gone, at3[gone])
	}
	if _, err := numerator.Lookup(ctx, kafka, "0.0.7.7", keys); !errors.Is(err, numerator.ErrNoState) {
		t.Errorf("a version of no state: %v", err)
	}
}
