package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// TestAnOfferNewerThanTheViewIsNotGone: a worker calls a queue item's offer
// gone only once its view has read offers-table to the end. An offer
// written just before the question is held (the view is synced first); an
// offer never written is gone; a view that cannot answer (stopped) holds
// everything, so no item is dropped for it.
func TestAnOfferNewerThanTheViewIsNotGone(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	cfg := table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	view := table.NewView(cfg, offers.Table, offers.TableCodec, "worker-test")
	w := &worker{view: view}
	if !w.viewHolds(context.Background(), "never") {
		t.Fatal("a view not running called an offer gone")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- view.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-view.Ready()

	id := offers.IDFrom(7)
	rec := &schemas.OfferRecord{Version: 1, Offer: schemas.Offer{ID: id, SellerID: "s", Category: "cars", Title: "t", Status: schemas.OfferActive,
		CreatedAt: time.Now(), UpdatedAt: time.Now()}}
	value, err := offers.TableCodec.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, brokers, offers.Table, []byte(id), value)
	if !w.viewHolds(context.Background(), id) {
		t.Error("an offer written before the question was called gone")
	}
	if w.viewHolds(context.Background(), offers.IDFrom(8)) {
		t.Error("an offer never written is held")
	}
}
