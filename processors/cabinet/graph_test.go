package cabinet_test

import (
	"testing"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// TestChangesCountOnceOnTheTester: the cabinet's callback counts a change
// once, skips it seen again (its source offset applied), and dead-letters
// a change whose seller is not its key's and garbage, counting nothing.
func TestChangesCountOnceOnTheTester(t *testing.T) {
	m := cabinet.NewMetrics(metrics.New())
	tt := table.NewTester(cabinet.Graph(m))
	key := offers.CabinetKey("s1", offers.IDFrom(1))
	ch := &schemas.CabinetChange{SellerID: "s1", OfferID: offers.IDFrom(1), SourceTopic: topics.OffersCommands, SourcePartition: 0, SourceOffset: 10,
		After: schemas.Summary{Presets: []string{offers.PresetAll, offers.PresetActive}}}
	data, err := schemas.CabinetChanges.Encode(ch)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tt.Consume(topics.CabinetChanges, 0, key, data); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := tt.Value(key).(*schemas.SellerCabinet)
	if c == nil || c.Active != 1 || m.Changes.With("repeated").Value() != 1 {
		t.Fatalf("after a change and its repeat: %+v, repeated %d", c, m.Changes.With("repeated").Value())
	}
	other := *ch
	other.SellerID, other.SourceOffset = "s2", 11
	wrong, err := schemas.CabinetChanges.Encode(&other)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]byte{wrong, []byte("garbage")} {
		out, err := tt.Consume(topics.CabinetChanges, 0, key, v)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0].Topic != topics.OffersDead {
			t.Fatalf("a bad change emitted %v, want one dead letter", out)
		}
	}
	if c, _ := tt.Value(key).(*schemas.SellerCabinet); c.Active != 1 || m.DeadLetters.Value() != 2 {
		t.Fatalf("bad changes counted: %+v, dead letters %d", c, m.DeadLetters.Value())
	}
}
