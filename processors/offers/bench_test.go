package offers_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// BenchmarkCommands decides batches of 64 commands (a create, then an
// update of each offer) on the runtime's tester, the aggregate's CPU and
// allocations per command without a broker or a store: go test -bench
// Commands -benchmem ./processors/offers (docs/BENCHMARKS.md).
func BenchmarkCommands(b *testing.B) {
	const batch = 64
	tt := table.NewTester(offers.Graph(offers.Config{Metrics: offers.NewMetrics(metrics.New())}))
	encode := func(c *schemas.OfferCommand) []byte {
		data, err := schemas.OfferCommands.Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer() // the commands' encoding is not the aggregate's
		creates := make([]*kgo.Record, batch)
		updates := make([]*kgo.Record, batch)
		for i := range batch {
			id := offers.IDFrom(uint64(n))
			n++
			o := newOffer(id)
			creates[i] = tt.Record(topics.OffersCommands, 0, id, encode(&schemas.OfferCommand{Kind: schemas.CommandCreate,
				OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: o}))
			o.Title = "two"
			updates[i] = tt.Record(topics.OffersCommands, 0, id, encode(&schemas.OfferCommand{Kind: schemas.CommandUpdate,
				OfferID: id, SellerID: "s1", ExpectedVersion: 1, Offer: o}))
		}
		b.StartTimer()
		for _, recs := range [][]*kgo.Record{creates, updates} {
			out, err := tt.ConsumeBatch(recs...)
			if err != nil || len(out) < batch {
				b.Fatalf("%d outputs, %v", len(out), err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*n), "ns/command")
}
