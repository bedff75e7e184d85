package offers_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// running runs the aggregate on brokers with its local state in dir until
// the returned stop is called.
func running(t *testing.T, brokers []string, dir string) (stop func()) {
	t.Helper()
	cfg := offers.Config{Streams: table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: dir, Replication: 1, Logger: testkit.Logger()}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- offers.Run(ctx, cfg) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-errc; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestAnswerGivenBeforeACrashIsInTheTable recreates what a kill -9 can
// leave on the table runtime: the update's batch wrote its table value to
// offers-table, but not its mark (the changelog record naming the input it
// applied), and the command's offset was not committed; the member's disk
// is lost too. Started on that log, the aggregate handles the update again
// against a table that holds it, recognises it (its record remembers the
// answer), and answers it as the first time (OK, version 2), not as a new
// update on version 2 (a conflict); the table ends at the version the
// client was told.
func TestAnswerGivenBeforeACrashIsInTheTable(t *testing.T) {
	// The first run: a create and an update, answered and persisted.
	first := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, first, topics.Catalogue(2))
	stop := running(t, first, t.TempDir())
	p := testkit.Client(t, first, kgo.RequiredAcks(kgo.AllISRAcks()))
	res := offers.NewResults(testkit.Logger())
	rctx, rcancel := context.WithCancel(context.Background())
	rdone := make(chan struct{})
	go func() { defer close(rdone); _ = res.Run(rctx, testkit.Cluster(t, first)) }()
	<-res.Ready()
	cl := offers.NewClient(p, res, 30*time.Second)
	ctx := testkit.Context(t, 2*time.Minute)
	price := int64(100)
	o := &schemas.Offer{ID: offers.IDFrom(rand.Uint64()), SellerID: "s1", Category: "cars", Title: "one", Price: &price, Currency: "RUB"}
	for i, c := range []*schemas.OfferCommand{
		{Kind: schemas.CommandCreate, OfferID: o.ID, SellerID: "s1", ExpectedVersion: -1, Offer: o},
		{Kind: schemas.CommandUpdate, OfferID: o.ID, SellerID: "s1", ExpectedVersion: 1, Offer: &schemas.Offer{
			ID: o.ID, SellerID: "s1", Category: "cars", Title: "two", Price: &price, Currency: "RUB"}},
	} {
		if r, err := cl.Do(ctx, c); err != nil || r.Outcome != schemas.OutcomeOK || r.Version != int64(i+1) {
			t.Fatalf("command %d: %+v %v", i, r, err)
		}
	}
	stop()
	rcancel()
	<-rdone
	commands := testkit.ReadAll(t, first, topics.OffersCommands)
	// The table's values: a mark rides on a later batch's record, or is a
	// record of its own that says a value again.
	var values []*kgo.Record
	for _, r := range testkit.ReadAll(t, first, topics.OffersTable) {
		if n := len(values); n == 0 || string(values[n-1].Key) != string(r.Key) || string(values[n-1].Value) != string(r.Value) {
			values = append(values, r)
		}
	}
	if len(commands) != 2 || len(values) != 2 {
		t.Fatalf("the first run left %d commands and %d table values, want 2 and 2", len(commands), len(values))
	}

	// The log the crash left: both commands, both values without marks,
	// the update's offset not committed.
	second := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, second, topics.Catalogue(2))
	w := testkit.Client(t, second, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for _, r := range append(commands, values...) {
		recs = append(recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value})
	}
	if err := w.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	update := commands[1]
	var at kadm.Offsets
	at.Add(kadm.Offset{Topic: topics.OffersCommands, Partition: update.Partition, At: update.Offset, LeaderEpoch: -1})
	if _, err := testkit.Admin(t, second).CommitOffsets(ctx, offers.Group, at); err != nil {
		t.Fatal(err)
	}

	running(t, second, t.TempDir())
	testkit.Eventually(t, time.Minute, "the update answered again after the restart", func() bool {
		for _, r := range testkit.ReadAll(t, second, topics.OffersResults) {
			var a schemas.OfferResult
			if err := schemas.OfferResults.Decode(r.Value, &a); err != nil {
				t.Fatal(err)
			}
			if a.SourcePartition == update.Partition && a.SourceOffset == update.Offset {
				if a.Outcome != schemas.OutcomeOK || a.Version != 2 {
					t.Fatalf("the update was answered %s (version %d) after the crash, OK version 2 before", a.Outcome, a.Version)
				}
				return true
			}
		}
		return false
	})
	var last schemas.OfferRecord
	for _, r := range testkit.ReadAll(t, second, topics.OffersTable) {
		if string(r.Key) == o.ID && r.Value != nil {
			if err := schemas.OfferRecords.Decode(r.Value, &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	if last.Version != 2 || last.Offer.Title != "two" {
		t.Fatalf("offers-table ends at version %d %q, the client was told 2 \"two\"", last.Version, last.Offer.Title)
	}
}

// TestACommandSupersededInItsBatchKeepsItsOutputs: two commands on one
// offer reach the aggregate in one batch (a sale, then a retitle), and the
// process dies after the batch's records reached the broker but before
// its transaction committed (the broker answers its commit "try again"
// until the kill), its disk lost with it. Restarted, the aggregate fences
// the transaction left open and decides both commands again. The sale's
// change must not be lost: the cabinet.changes the aggregate wrote,
// folded as the cabinet folds them, are the recount of offers-table.
// (Until 2026-12-03 the changelog and the outputs were two writes, and the
// broker refused the outputs here: the first command was then recalled on
// a value that was no longer its own, and its change was lost for good.)
func TestACommandSupersededInItsBatchKeepsItsOutputs(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	stop := running(t, brokers, t.TempDir())
	p := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, 2*time.Minute)
	price := int64(100)
	id := offers.IDFrom(rand.Uint64())
	offer := func(title string, status schemas.OfferStatus) *schemas.Offer {
		return &schemas.Offer{ID: id, SellerID: "s1", Category: "cars", Title: title, Price: &price, Currency: "RUB", Status: status}
	}
	o := offer("one", "")
	send := func(cs ...*schemas.OfferCommand) {
		t.Helper()
		var recs []*kgo.Record
		for _, c := range cs {
			v, err := schemas.OfferCommands.Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(c.OfferID), Value: v})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	version := func() int64 {
		var r schemas.OfferRecord
		for _, rec := range testkit.ReadAll(t, brokers, topics.OffersTable) {
			if string(rec.Key) == o.ID && rec.Value != nil {
				if err := schemas.OfferRecords.Decode(rec.Value, &r); err != nil {
					t.Fatal(err)
				}
			}
		}
		return r.Version
	}
	send(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: o.ID, SellerID: "s1", ExpectedVersion: -1, Offer: o})
	testkit.Eventually(t, time.Minute, "the offer created", func() bool { return version() == 1 })
	ends, err := testkit.Admin(t, brokers).ListEndOffsets(ctx, topics.OffersCommands)
	if err != nil {
		t.Fatal(err)
	}
	if err := streams.WaitCommitted(ctx, testkit.Admin(t, brokers), offers.Group, ends.Offsets()); err != nil {
		t.Fatal(err)
	}

	// From here the broker answers every commit "try again".
	var refusing atomic.Bool
	var refused atomic.Int64
	refusing.Store(true)
	b.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	// One produce, one record batch: one batch of the aggregate.
	send(&schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: o.ID, SellerID: "s1", ExpectedVersion: 1, Offer: offer("one", schemas.OfferSold)},
		&schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: o.ID, SellerID: "s1", ExpectedVersion: 2, Offer: offer("two", schemas.OfferSold)})
	testkit.Eventually(t, time.Minute, "the batch's commit asked for", func() bool { return refused.Load() > 0 })
	stop() // the kill: the batch's transaction open, its store write not made
	refusing.Store(false)

	running(t, brokers, t.TempDir()) // the disk lost too
	fold := func() map[string]*schemas.SellerCabinet {
		parts := map[string]*schemas.SellerCabinet{}
		for _, r := range testkit.ReadAll(t, brokers, topics.CabinetChanges) {
			var ch schemas.CabinetChange
			if err := schemas.CabinetChanges.Decode(r.Value, &ch); err != nil {
				t.Fatal(err)
			}
			parts[string(r.Key)], _ = cabinet.Apply(parts[string(r.Key)], &ch)
		}
		return cabinet.Merge(parts)
	}
	recount := func() *schemas.SellerCabinet {
		var recs []*schemas.OfferRecord
		for _, v := range testkit.Table(t, brokers, topics.OffersTable) {
			var r schemas.OfferRecord
			if err := schemas.OfferRecords.Decode(v, &r); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &r)
		}
		return cabinet.Recount(recs)["s1"]
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got := fold()["s1"]
		if got == nil {
			got = cabinet.Empty("s1")
		}
		ok, diff := cabinet.Equal(got, recount())
		if ok && version() == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offers-table at version %d, cabinet.changes folded are not its recount: %s", version(), diff)
		}
	}
}
