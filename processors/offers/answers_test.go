package offers_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// TestAnswersHandedOverInProcess: a client whose matcher never reads
// offers.results is answered by the aggregate of its own process
// (Config.OnAnswer), and only with answers the topic has: each handed over
// is on offers.results.
func TestAnswersHandedOverInProcess(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	res := offers.NewResults(testkit.Logger()) // not Run: no copy from the topic
	handed := make(chan schemas.OfferResult, 16)
	cfg := offers.Config{Streams: table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()},
		OnAnswer: func(r schemas.OfferResult) {
			handed <- r
			res.Deliver(streams.RequestID{Partition: r.SourcePartition, Offset: r.SourceOffset}, r)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- offers.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})

	cl := offers.NewClient(testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks())), res, time.Minute)
	wctx := testkit.Context(t, 2*time.Minute)
	price := int64(100)
	o := &schemas.Offer{ID: offers.IDFrom(rand.Uint64()), SellerID: "s1", Category: "cars", Title: "one", Price: &price, Currency: "RUB"}
	r, err := cl.Do(wctx, &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: o.ID, SellerID: "s1", ExpectedVersion: -1, Offer: o})
	if err != nil || r.Outcome != schemas.OutcomeOK || r.Version != 1 {
		t.Fatalf("create: %+v %v", r, err)
	}
	got := <-handed
	var onTopic []schemas.OfferResult
	for _, rec := range testkit.ReadAll(t, brokers, topics.OffersResults) {
		var a schemas.OfferResult
		if err := schemas.OfferResults.Decode(rec.Value, &a); err != nil {
			t.Fatal(err)
		}
		onTopic = append(onTopic, a)
	}
	if len(onTopic) != 1 || onTopic[0] != got || got != r {
		t.Fatalf("handed over %+v, answered %+v; offers.results holds %+v", got, r, onTopic)
	}
}
