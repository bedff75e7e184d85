package numerator

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// TestTheGroupRecordsInMemory runs the numerator's own table group, its
// handler and table, on the in-memory tester (no broker): sightings record
// the generations a key was seen in, a sealer's decision gives the key its
// doc_id and is answered on numerator.assignments (again when handled
// again), a garbage sighting is dead-lettered by the handler.
func TestTheGroupRecordsInMemory(t *testing.T) {
	tt := table.NewGroupTester(newGroup(table.Config{}, NewMetrics(metrics.New()), 0, nil), TableCodec)
	k := sharding.Key{BusinessID: 1, OfferID: "sku-1", ShopID: 10, WarehouseID: 1}
	seen := func(g int64) []byte {
		data, err := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: 1, OfferID: "sku-1", ShopID: 10, WarehouseID: 1, Generation: g})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	entry := func() *schemas.NumeratorEntry {
		t.Helper()
		e, ok := tt.Value(k.String()).(*schemas.NumeratorEntry)
		if !ok {
			t.Fatalf("the table holds %#v for %s", tt.Value(k.String()), k)
		}
		return e
	}
	for _, g := range []int64{1, 2, 2} {
		if out, err := tt.Consume(topics.NumeratorOffers, 0, k.String(), seen(g)); err != nil || len(out) != 0 {
			t.Fatalf("sighting in generation %d: %v, outputs %v", g, err, out)
		}
	}
	if e := entry(); e.LastSeen != 2 || e.SeenBefore != 1 || e.DocID != NoDocID {
		t.Fatalf("after generations 1, 2 and 2 again: %+v", e)
	}
	decision, err := schemas.Assignments.Encode(&schemas.Assignment{BusinessID: 1, OfferID: "sku-1", ShopID: 10, WarehouseID: 1,
		Shard: 3, DocID: 7, Version: "0.0.1.2", Generation: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := tt.Record(topics.NumeratorResults, 0, k.String(), decision)
	for range 2 { // the second: handled again, as after a crash
		out, err := tt.ConsumeBatch(r)
		if err != nil || len(out) != 1 || out[0].Topic != topics.NumeratorAssignments {
			t.Fatalf("the decision: %v, outputs %v", err, out)
		}
	}
	if e := entry(); e.Shard != 3 || e.DocID != 7 || e.Version != "0.0.1.2" || e.LastSeen != 2 {
		t.Fatalf("after the decision: %+v", e)
	}
	out, err := tt.Consume(topics.NumeratorOffers, 0, k.String(), []byte("garbage"))
	if err != nil || len(out) != 1 || out[0].Topic != topics.NumeratorDead {
		t.Fatalf("a garbage sighting: %v, outputs %v", err, topicsOf(out))
	}
}

func topicsOf(rs []*kgo.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Topic)
	}
	return out
}
