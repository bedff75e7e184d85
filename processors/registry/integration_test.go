package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/registry/registrytest"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

const partitions = 4

// cluster is a broker with the catalogue, an epoch registered for client
// "shop" and a catalogue following the epochs topic.
type cluster struct {
	brokers []string
	kafka   *streams.Cluster
	epochs  *registry.Catalogue
	state   string
	framing schemas.Framing // of the verdicts
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	b := testkit.Broker(t, "")
	c := &cluster{brokers: b.Addrs(), kafka: testkit.Cluster(t, b.Addrs()), state: t.TempDir()}
	testkit.EnsureTopics(t, c.brokers, topics.Catalogue(partitions))
	testkit.RegisterEpoch(t, c.brokers, "shop")
	c.epochs = registrytest.FollowEpochs(t, c.brokers)
	return c
}

func (c *cluster) config(onReady func()) registry.Config {
	return registry.Config{
		Streams: table.Config{Cluster: c.kafka, StateDir: c.state, Replication: 1, Logger: testkit.Logger()},
		Rules:   registry.DefaultRules(), Epochs: c.epochs, Logger: testkit.Logger(), OnReady: onReady, Framing: c.framing,
	}
}

// start runs the registry until the returned stop function is called; stop
// returns Run's error.
func (c *cluster) start(t *testing.T) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- registry.Run(ctx, c.config(func() { close(ready) })) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("registry stopped before it was ready: %v", err)
	case <-time.After(90 * time.Second):
		cancel()
		t.Fatal("registry not ready after 90s")
	}
	var stopped bool
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-errc
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func produceDocs(t *testing.T, brokers []string, docs []*schemas.RawDocument) {
	testkit.ProduceDocs(t, brokers, "shop", docs)
}

func shuffledVersions(keys, versions int, seed uint64) []*schemas.RawDocument {
	return testkit.ShuffledVersions(keys, versions, seed)
}

type verdictKey struct {
	p int32
	o int64
}

// verdicts reads documents.results and checks that every ingested document
// has a verdict and that repeated verdicts (after a restart) agree.
func verdicts(t *testing.T, brokers []string) map[verdictKey]schemas.Verdict {
	t.Helper()
	out := map[verdictKey]schemas.Verdict{}
	for _, r := range testkit.ReadAll(t, brokers, topics.DocumentsResults) {
		var v schemas.Verdict
		if err := schemas.Verdicts.Decode(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		k := verdictKey{v.SourcePartition, v.SourceOffset}
		if old, ok := out[k]; ok && old != v {
			t.Fatalf("two different verdicts for %v: %+v and %+v", k, old, v)
		}
		out[k] = v
	}
	return out
}

func waitVerdicts(t *testing.T, brokers []string, n int) map[verdictKey]schemas.Verdict {
	t.Helper()
	var got map[verdictKey]schemas.Verdict
	testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("%d verdicts", n), func() bool {
		got = verdicts(t, brokers)
		return len(got) >= n
	})
	return got
}

func tableOf(t *testing.T, brokers []string) map[string][]byte {
	return testkit.Table(t, brokers, topics.RegistryTable)
}

func TestShuffledVersionsEndFreshest(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	const keys, versions = 1000, 10
	docs := shuffledVersions(keys, versions, 1)
	stop := c.start(t)
	produceDocs(t, c.brokers, docs)
	got := waitVerdicts(t, c.brokers, len(docs))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts := map[schemas.Decision]int{}
	for _, v := range got {
		counts[v.Verdict]++
	}
	if counts[schemas.Invalid] != 0 || counts[schemas.Accepted] < keys {
		t.Fatalf("verdicts: %v", counts)
	}
	table := tableOf(t, c.brokers)
	if len(table) != keys {
		t.Fatalf("table has %d keys, want %d", len(table), keys)
	}
	for k, raw := range table {
		var rec schemas.RegistryRecord
		if err := schemas.RegistryRecords.Decode(raw, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Version != versions {
			t.Fatalf("%s holds version %d, want %d", k, rec.Version, versions)
		}
	}
	// The last change per key is the freshest version too.
	last := map[string]schemas.RegistryRecord{}
	for _, r := range testkit.ReadAll(t, c.brokers, topics.DocumentsChanges) {
		var rec schemas.RegistryRecord
		if err := schemas.RegistryRecords.Decode(r.Value, &rec); err != nil {
			t.Fatal(err)
		}
		last[string(r.Key)] = rec
	}
	for k, rec := range last {
		if rec.Version != versions {
			t.Fatalf("last change of %s is version %d", k, rec.Version)
		}
	}
}

// TestBadInputGetsAVerdictAndADeadLetter: every record a producer can send
// that is not a document of its key's partition gets an INVALID verdict
// with the reason and is kept on documents.dead; a good one after them is
// accepted.
func TestBadInputGetsAVerdictAndADeadLetter(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	stop := c.start(t)
	cl := testkit.Client(t, c.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testkit.Context(t, time.Minute)
	v := schemas.Verdict{Client: "x", PK: "y", Verdict: schemas.Accepted, Timestamp: time.Now()}
	foreign, _ := schemas.Verdicts.Encode(&v)
	doc := shuffledVersions(1, 1, 7)[0]
	body, err := schemas.RawDocuments.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	key := "shop/" + doc.PK
	ends, err := streams.EndOffsets(ctx, testkit.Admin(t, c.brokers), topics.DocumentsIngest)
	if err != nil {
		t.Fatal(err)
	}
	n := int32(len(ends))
	right := streams.Partition(key, n)
	at := func(k string) int32 { return streams.Partition(k, n) }
	cases := []struct {
		key    string
		value  []byte
		part   int32
		reason string
	}{
		{"shop/1", []byte("not avro"), at("shop/1"), "undecodable"},
		{"shop/2", foreign, at("shop/2"), "not a offerlog.documents.RawDocument"},
		{"shop/3", []byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, at("shop/3"), "unknown writer schema"},
		{"shop/4", nil, at("shop/4"), "null value"},
		{"shop/5", body[:len(body)-3], at("shop/5"), "cut short"},
		{"shop/6", append(append([]byte(nil), body...), 0), at("shop/6"), "bytes left"},
		{"no-slash", body, at("no-slash"), "not client/pk"},
		{key, body, (right + 1) % n, fmt.Sprintf("belongs on partition %d", right)},
	}
	for _, cs := range cases {
		r := &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte(cs.key), Value: cs.value, Partition: cs.part}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	good := shuffledVersions(1, 1, 1)
	produceDocs(t, c.brokers, good)
	got := waitVerdicts(t, c.brokers, len(cases)+1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	reasons := map[string]string{} // key -> reason of its INVALID verdict
	for _, v := range got {
		switch v.Verdict {
		case schemas.Invalid:
			k := v.PK
			if v.Client != "" {
				k = v.Client + "/" + v.PK
			}
			reasons[k] = v.Reason
		case schemas.Accepted:
			accepted++
		}
	}
	if accepted != 1 || len(reasons) != len(cases) {
		t.Fatalf("verdicts %+v", got)
	}
	deads := map[string]schemas.DeadLetter{}
	for _, r := range testkit.ReadAll(t, c.brokers, topics.DocumentsDead) {
		var dl schemas.DeadLetter
		if err := schemas.DeadLetters.Decode(r.Value, &dl); err != nil {
			t.Fatal(err)
		}
		deads[string(dl.Key)] = dl
	}
	for _, cs := range cases {
		if !strings.Contains(reasons[cs.key], cs.reason) {
			t.Errorf("%s: verdict's reason %q, want %q in it", cs.key, reasons[cs.key], cs.reason)
		}
		dl, ok := deads[cs.key]
		if !ok || !bytes.Equal(dl.Value, cs.value) || !strings.Contains(dl.Reason, cs.reason) {
			t.Errorf("%s: dead letter %v %+v", cs.key, ok, dl)
		}
	}
}

// TestRegistryProcess is not a test of its own: TestKilledMidStreamLosesNoVerdict
// runs the test binary with it selected to get a registry in a separate
// process that it can kill.
func TestRegistryProcess(t *testing.T) {
	brokers := os.Getenv("OFFERLOG_TEST_REGISTRY_BROKERS")
	if brokers == "" {
		t.Skip("runs only as the process TestKilledMidStreamLosesNoVerdict kills")
	}
	c := &cluster{brokers: strings.Split(brokers, ","), state: os.Getenv("OFFERLOG_TEST_REGISTRY_STATE")}
	c.kafka = testkit.Cluster(t, c.brokers)
	c.epochs = registrytest.FollowEpochs(t, c.brokers)
	err := registry.Run(context.Background(), c.config(nil))
	t.Fatalf("the registry returned before it was killed: %v", err)
}

func TestKilledMidStreamLosesNoVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	docs := shuffledVersions(500, 20, 2)
	half := len(docs) / 2
	produceDocs(t, c.brokers, docs[:half])

	// A registry in a process of its own, killed with SIGKILL while it
	// decides the second half of the stream (it decides a half in a
	// fraction of a second, so the second half is sent once it is at work
	// and the kill follows the send): no shutdown, no last commit, local
	// state as the crash left it.
	kill := testkit.Child(t, "TestRegistryProcess", "OFFERLOG_TEST_REGISTRY_BROKERS="+strings.Join(c.brokers, ","),
		"OFFERLOG_TEST_REGISTRY_STATE="+c.state)
	testkit.Eventually(t, 2*time.Minute, "some verdicts from the registry process", func() bool {
		return len(verdicts(t, c.brokers)) > 1000
	})
	produceDocs(t, c.brokers, docs[half:])
	kill()
	first := len(verdicts(t, c.brokers))
	if first >= len(docs) {
		t.Logf("the registry process finished before it was killed (%d verdicts)", first)
	}

	// Start again on the same state: every message gets its verdict.
	stop := c.start(t)
	got := waitVerdicts(t, c.brokers, len(docs))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(docs) {
		t.Fatalf("%d verdicts for %d documents", len(got), len(docs))
	}
	t.Logf("%d verdict records for %d documents: %d messages decided again after the kill",
		len(testkit.ReadAll(t, c.brokers, topics.DocumentsResults)), len(docs),
		len(testkit.ReadAll(t, c.brokers, topics.DocumentsResults))-len(docs))
	// The end state equals an uninterrupted run on a fresh cluster.
	fresh := newCluster(t)
	produceDocs(t, fresh.brokers, docsInLogOrder(t, c.brokers))
	stopFresh := fresh.start(t)
	waitVerdicts(t, fresh.brokers, len(docs))
	if err := stopFresh(); err != nil {
		t.Fatal(err)
	}
	assertSameTable(t, tableOf(t, c.brokers), tableOf(t, fresh.brokers), false)
}

// TestInputReadAgainKeepsItsVerdicts: when the group's commits are lost
// (a crash before them) every input record is read again, here every one,
// with 20 versions per key: more than a record remembers verdicts for.
// The registry, on its own disk or restored from the changelog on a fresh
// one, knows from its table which records it decided and decides none
// again: no second verdict, none different, the same table.
func TestInputReadAgainKeepsItsVerdicts(t *testing.T) {
	c := newCluster(t)
	docs := shuffledVersions(100, 20, 3)
	produceDocs(t, c.brokers, docs)
	stop := c.start(t)
	waitVerdicts(t, c.brokers, len(docs))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	table := tableOf(t, c.brokers)
	adm := testkit.Admin(t, c.brokers)
	for _, disk := range []string{"its own disk", "a fresh disk"} {
		if disk == "a fresh disk" {
			c.state = t.TempDir()
		}
		ctx := testkit.Context(t, time.Minute)
		var zero kadm.Offsets
		for p := range int32(partitions) {
			zero.Add(kadm.Offset{Topic: topics.DocumentsIngest, Partition: p, At: 0, LeaderEpoch: -1})
		}
		if _, err := adm.CommitOffsets(ctx, string(registry.Group), zero); err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, topics.DocumentsIngest)
		if err != nil {
			t.Fatal(err)
		}
		stop := c.start(t)
		if err := streams.WaitCommitted(ctx, adm, string(registry.Group), ends.Offsets()); err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		verdicts(t, c.brokers) // fails on two different verdicts for one record
		if n := len(testkit.ReadAll(t, c.brokers, topics.DocumentsResults)); n != len(docs) {
			t.Fatalf("on %s: %d verdict records for %d documents, want none again", disk, n, len(docs))
		}
		assertSameTable(t, tableOf(t, c.brokers), table, true)
	}
}

// docsInLogOrder returns the documents of documents.ingest as they were
// logged, partition by partition (re-producing them keeps each partition's
// order, since keys map to the same partitions).
func docsInLogOrder(t *testing.T, brokers []string) []*schemas.RawDocument {
	var out []*schemas.RawDocument
	for _, r := range testkit.ReadAll(t, brokers, topics.DocumentsIngest) {
		var d schemas.RawDocument
		if err := schemas.RawDocuments.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, &d)
	}
	return out
}

// assertSameTable compares two tables; with exact it compares bytes, else
// the documents (source offsets and ingest times differ between clusters).
func assertSameTable(t *testing.T, a, b map[string][]byte, exact bool) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("tables have %d and %d keys", len(a), len(b))
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok {
			t.Fatalf("key %s missing", k)
		}
		if exact {
			if string(va) != string(vb) {
				t.Fatalf("key %s differs", k)
			}
			continue
		}
		var ra, rb schemas.RegistryRecord
		if err := schemas.RegistryRecords.Decode(va, &ra); err != nil {
			t.Fatal(err)
		}
		if err := schemas.RegistryRecords.Decode(vb, &rb); err != nil {
			t.Fatal(err)
		}
		if registry.Compare(registry.StampOf(&ra), registry.StampOf(&rb)) != 0 || ra.Status != rb.Status {
			t.Fatalf("key %s: %+v vs %+v", k, ra, rb)
		}
	}
}

func TestReplayRebuildsTheSameTable(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	docs := shuffledVersions(300, 5, 3)
	// Deletes and TTLs too, so tombstones and expiry are part of the table.
	for i, d := range docs {
		switch i % 7 {
		case 0:
			d.Action, d.Fields = schemas.ActionDelete, nil
		case 1:
			d.TTLSeconds = 1
		}
	}
	stop := c.start(t)
	produceDocs(t, c.brokers, docs)
	waitVerdicts(t, c.brokers, len(docs))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	before := tableOf(t, c.brokers)
	outputs := []string{topics.DocumentsResults, topics.DocumentsChanges}
	first := map[string][]*kgo.Record{}
	for _, o := range outputs {
		first[o] = testkit.ReadAll(t, c.brokers, o)
	}
	ctx := testkit.Context(t, 3*time.Minute)
	if err := registry.Replay(ctx, c.config(nil), partitions, -1); err != nil {
		t.Fatal(err)
	}
	after := tableOf(t, c.brokers)
	assertSameTable(t, before, after, true)
	// A replay rebuilds the table only: no verdict or change is written
	// twice.
	for _, o := range outputs {
		if n := len(testkit.ReadAll(t, c.brokers, o)); n != len(first[o]) {
			t.Errorf("%s holds %d records after a replay, %d before: the replay wrote outputs", o, n, len(first[o]))
		}
	}
	// With --reemit it writes them again, each marked, the same records.
	cfg := c.config(nil)
	cfg.Streams.Replaying = replay.Reemit
	if err := registry.Replay(ctx, cfg, partitions, -1); err != nil {
		t.Fatal(err)
	}
	assertSameTable(t, before, tableOf(t, c.brokers), true)
	for _, o := range outputs {
		all := testkit.ReadAll(t, c.brokers, o)
		if len(all) != 2*len(first[o]) {
			t.Errorf("%s: %d records after a replay with --reemit, want %d", o, len(all), 2*len(first[o]))
		}
		marked := 0
		for _, r := range all {
			for _, h := range r.Headers {
				if h.Key == replay.Header {
					marked++
				}
			}
		}
		if marked != len(all)-len(first[o]) {
			t.Errorf("%s: %d records marked %s, want the %d re-emitted", o, marked, replay.Header, len(all)-len(first[o]))
		}
	}
	if _, err := filepath.Glob(filepath.Join(c.state, "processor", "registry", "*")); err != nil {
		t.Fatal(err)
	}
}

func TestSweepExpiresTTLDocuments(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	rules := registry.DefaultRules()
	rules.TombstoneTTL = time.Second
	cfg := c.config(nil)
	cfg.Rules, cfg.SweepInterval = rules, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- registry.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})
	docs := shuffledVersions(3, 1, 1)
	docs[0].TTLSeconds = 1 // key 0 lives a second, the others forever
	docs[0].Timestamp = time.Now().UTC().Truncate(time.Millisecond)
	produceDocs(t, c.brokers, docs)

	// The sweep turns the document into a tombstone, then removes it.
	var sawTombstone bool
	testkit.Eventually(t, time.Minute, "the TTL'd document expired and its tombstone removed", func() bool {
		for _, r := range testkit.ReadAll(t, c.brokers, topics.DocumentsChanges) {
			var rec schemas.RegistryRecord
			if err := schemas.RegistryRecords.Decode(r.Value, &rec); err != nil {
				t.Fatal(err)
			}
			if string(r.Key) == "shop/"+docs[0].PK && rec.Status == schemas.StatusTombstone && rec.Cause == schemas.CauseExpiry {
				sawTombstone = true
			}
		}
		_, present := tableOf(t, c.brokers)["shop/"+docs[0].PK]
		return sawTombstone && !present
	})
	table := tableOf(t, c.brokers)
	if len(table) != 2 {
		t.Fatalf("the table has %d keys, want the 2 without TTL", len(table))
	}
	checks := 0
	for _, r := range testkit.ReadAll(t, c.brokers, topics.DocumentsIngest) {
		if w, _, err := schemas.Writer(r.Value); err == nil && w.Name == schemas.ExpiryCheckName {
			checks++
		}
	}
	if checks == 0 {
		t.Fatal("no expiry check went through documents.ingest")
	}
}

// TestEpochRegisteredAMomentAgoIsKnown: a document naming an epoch
// registered just before it is accepted, the catalogue being synced beside
// the processor rather than from its callback.
func TestEpochRegisteredAMomentAgoIsKnown(t *testing.T) {
	c := newCluster(t)
	c.start(t)
	for i := range 5 {
		client := fmt.Sprint("fresh", i)
		testkit.RegisterEpoch(t, c.brokers, client)
		testkit.ProduceDocs(t, c.brokers, client, testkit.ShuffledVersions(1, 1, uint64(i)))
	}
	for k, v := range waitVerdicts(t, c.brokers, 5) {
		if v.Verdict != schemas.Accepted {
			t.Errorf("%v: %s %q, want accepted", k, v.Verdict, v.Reason)
		}
	}
}

// TestGarbageInTheTableIsDeadLettered: a value of the registry table that
// does not decode, loaded by a registry starting on an empty local state,
// is dead-lettered with the reason when its key is next touched and taken
// as absent: the next document of that key is accepted.
func TestGarbageInTheTableIsDeadLettered(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	stop := c.start(t)
	produceDocs(t, c.brokers, shuffledVersions(2, 1, 1))
	waitVerdicts(t, c.brokers, 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, c.brokers, topics.RegistryTable, []byte("shop/0"), []byte("garbage"))
	c.state = t.TempDir()
	c.start(t)
	produceDocs(t, c.brokers, testkit.ShuffledVersions(1, 2, 2)[1:]) // one document of key 0, version 1 or 2
	got := waitVerdicts(t, c.brokers, 3)
	accepted := 0
	for _, v := range got {
		if v.Verdict == schemas.Accepted {
			accepted++
		}
	}
	if accepted != 3 {
		t.Errorf("verdicts %+v, want 3 accepted", got)
	}
	deads := testkit.ReadAll(t, c.brokers, topics.DocumentsDead)
	var dl schemas.DeadLetter
	if len(deads) != 1 || schemas.DeadLetters.Decode(deads[0].Value, &dl) != nil ||
		dl.Topic != string(topics.RegistryTable) || string(dl.Value) != "garbage" || !strings.Contains(dl.Reason, "undecodable table value") {
		t.Fatalf("dead letters %d, first %+v; want the table value's", len(deads), dl)
	}
}

// TestOversizedRecordLeavesTheRegistryServing: a 5 MB undecodable value is
// answered INVALID and dead-lettered as a bounded record (its first 64 KiB,
// its size and SHA-256), and the registry goes on deciding.
func TestOversizedRecordLeavesTheRegistryServing(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c := newCluster(t)
	stop := c.start(t)
	cl := testkit.Client(t, c.brokers, kgo.ProducerBatchMaxBytes(8<<20))
	big := bytes.Repeat([]byte{0xC3}, 5<<20)
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte("shop/big"), Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceDocs(t, c.brokers, shuffledVersions(1, 1, 3))
	got := waitVerdicts(t, c.brokers, 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	byVerdict := map[schemas.Decision]int{}
	for _, v := range got {
		byVerdict[v.Verdict]++
	}
	if byVerdict[schemas.Invalid] != 1 || byVerdict[schemas.Accepted] != 1 {
		t.Fatalf("verdicts %+v", got)
	}
	deads := testkit.ReadAll(t, c.brokers, topics.DocumentsDead)
	var dl schemas.DeadLetter
	if len(deads) != 1 || schemas.DeadLetters.Decode(deads[0].Value, &dl) != nil {
		t.Fatalf("%d dead letters", len(deads))
	}
	sum := sha256.Sum256(big)
	if len(deads[0].Value) > 100<<10 || len(dl.Value) != streams.MaxDeadLetterValue || dl.ValueSize != int64(len(big)) || !bytes.Equal(dl.ValueSHA256, sum[:]) {
		t.Fatalf("dead letter of %d bytes keeps %d of %d bytes", len(deads[0].Value), len(dl.Value), dl.ValueSize)
	}
}

// TestAnotherClientsFramingsDecode: documents written by another Kafka
// client (kcat, bytes from files) in the two framings a spec-following
// producer uses are accepted: single-object encoding headed with the
// fingerprint the Avro specification defines (computed here by its
// algorithm over the schema's canonical form), and Confluent's framing
// with the registry id the schema registry API answers. The verdicts are
// written in Confluent's framing, as --export-framing confluent asks.
func TestAnotherClientsFramingsDecode(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	path := testkit.Tool(t, "kcat")
	c := newCluster(t)
	c.framing = schemas.FramingConfluent
	stop := c.start(t)
	sch, err := schemas.Current(schemas.RawDocumentName)
	if err != nil {
		t.Fatal(err)
	}
	docs := shuffledVersions(2, 1, 11)
	dir := t.TempDir()
	for i, doc := range docs {
		framed, err := schemas.RawDocuments.Encode(doc)
		if err != nil {
			t.Fatal(err)
		}
		body := framed[10:]
		var value []byte
		if i == 0 {
			value = binary.LittleEndian.AppendUint64([]byte{0xC3, 0x01}, specFingerprint([]byte(schemas.CanonicalForm(sch.Avro))))
		} else {
			value = binary.BigEndian.AppendUint32([]byte{0}, uint32(sch.ID))
		}
		file := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(file, append(value, body...), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(path, "-P", "-b", c.brokers[0], "-t", topics.DocumentsIngest, "-k", "shop/"+doc.PK,
			"-X", "topic.partitioner=murmur2", file)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
	}
	got := waitVerdicts(t, c.brokers, len(docs))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		if v.Verdict != schemas.Accepted {
			t.Fatalf("verdict %+v", v)
		}
	}
	verdict, err := schemas.Current(schemas.VerdictName)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range testkit.ReadAll(t, c.brokers, topics.DocumentsResults) {
		if len(r.Value) < 5 || r.Value[0] != 0 || int32(binary.BigEndian.Uint32(r.Value[1:5])) != verdict.ID {
			t.Fatalf("a verdict not in Confluent's framing: % x", r.Value[:min(len(r.Value), 10)])
		}
	}
}

// specFingerprint is the Avro specification's CRC-64-AVRO, as written there.
func specFingerprint(buf []byte) uint64 {
	const empty uint64 = 0xc15d213aa4d7a795
	var table [256]uint64
	for i := range table {
		fp := uint64(i)
		for range 8 {
			fp = (fp >> 1) ^ (empty & -(fp & 1))
		}
		table[i] = fp
	}
	fp := empty
	for _, b := range buf {
		fp = (fp >> 8) ^ table[byte(fp)^b]
	}
	return fp
}
