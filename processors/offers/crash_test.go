package offers_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// running runs the aggregate on brokers with its local state in dir until
// the returned stop is called.
func running(t *testing.T, brokers []string, dir string) (stop func()) {
	t.Helper()
	cfg := offers.Config{Streams: streams.Config{Brokers: brokers, StateDir: dir, Replication: 1, Logger: testkit.Logger()}}
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

// TestAnswerGivenBeforeACrashIsInTheTable recreates exactly what a kill -9
// can leave: the aggregate answered an update and wrote it to its local
// state, but its changelog write to offers-table was lost and the command's
// offset not committed. Started on that state, it recognises the command
// and answers it the same; the table topic must then hold the version the
// client was told (streams.Reassert).
func TestAnswerGivenBeforeACrashIsInTheTable(t *testing.T) {
	// The first run: a create and an update, answered and persisted.
	first := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, first, topics.Catalogue(2))
	dir := t.TempDir()
	stop := running(t, first, dir)
	p := testkit.Client(t, first, kgo.RequiredAcks(kgo.AllISRAcks()))
	res := offers.NewResults(testkit.Logger())
	rctx, rcancel := context.WithCancel(context.Background())
	rdone := make(chan struct{})
	go func() { defer close(rdone); _ = res.Run(rctx, first) }()
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
	testkit.Eventually(t, time.Minute, "both versions in offers-table", func() bool {
		return len(testkit.ReadAll(t, first, topics.OffersTable)) == 2
	})
	stop()
	rcancel()
	<-rdone
	commands := testkit.ReadAll(t, first, topics.OffersCommands)
	table := testkit.ReadAll(t, first, topics.OffersTable)

	// The log the crash left: both commands, the table without version 2
	// (an unrelated record in its place keeps the offsets the local state
	// has read), the update's offset not committed.
	second := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, second, topics.Catalogue(2))
	w := testkit.Client(t, second, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for _, r := range commands {
		recs = append(recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value})
	}
	recs = append(recs,
		&kgo.Record{Topic: topics.OffersTable, Partition: table[0].Partition, Key: table[0].Key, Value: table[0].Value},
		&kgo.Record{Topic: topics.OffersTable, Partition: table[1].Partition, Key: []byte("unrelated"), Value: nil})
	if err := w.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var at kadm.Offsets
	at.Add(kadm.Offset{Topic: topics.OffersCommands, Partition: commands[1].Partition, At: commands[1].Offset, LeaderEpoch: -1})
	if _, err := testkit.Admin(t, second).CommitOffsets(ctx, string(offers.Group), at); err != nil {
		t.Fatal(err)
	}

	running(t, second, dir)
	testkit.Eventually(t, time.Minute, "version 2 in offers-table after the restart", func() bool {
		var last schemas.OfferRecord
		for _, r := range testkit.ReadAll(t, second, topics.OffersTable) {
			if string(r.Key) == o.ID && r.Value != nil {
				if err := schemas.OfferRecords.Decode(r.Value, &last); err != nil {
					t.Fatal(err)
				}
			}
		}
		return last.Version == 2 && last.Offer.Title == "two"
	})
}
