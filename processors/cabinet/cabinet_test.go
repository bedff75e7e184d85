package cabinet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

func TestApplyCountsMoves(t *testing.T) {
	none := schemas.Summary{Presets: []string{}}
	active := schemas.Summary{Presets: []string{offers.PresetAll, offers.PresetActive}}
	banned := schemas.Summary{Presets: []string{offers.PresetAll, offers.PresetBanned}}
	sold := schemas.Summary{Presets: []string{offers.PresetAll, offers.PresetSold}, Sold: true, SoldPrice: 700}
	soldDeleted := schemas.Summary{Presets: []string{}, Sold: true, SoldPrice: 700}
	steps := []struct {
		before, after schemas.Summary
		want          [5]int64 // active, expired, banned, sold, money
		all           int64
	}{
		{none, active, [5]int64{1, 0, 0, 0, 0}, 1},
		{active, banned, [5]int64{0, 0, 1, 0, 0}, 1},
		{banned, sold, [5]int64{0, 0, 0, 1, 700}, 1},
		{sold, soldDeleted, [5]int64{0, 0, 0, 1, 700}, 0}, // sales only grow
	}
	var c *schemas.SellerCabinet
	for i, s := range steps {
		var applied bool
		c, applied = Apply(c, &schemas.CabinetChange{SellerID: "s", OfferID: "o", SourceTopic: topics.OffersCommands,
			SourcePartition: 1, SourceOffset: int64(i), Before: s.before, After: s.after})
		got := [5]int64{c.Active, c.Expired, c.Banned, c.Sold, c.MoneyEarned}
		if !applied || got != s.want || c.Presets.Get(offers.PresetAll) != s.all {
			t.Fatalf("step %d: applied %v, counters %v all %d; want %v all %d", i, applied, got, c.Presets.Get(offers.PresetAll), s.want, s.all)
		}
	}
	// A redelivered change is skipped; another partition's is not.
	again, applied := Apply(c, &schemas.CabinetChange{SellerID: "s", SourceTopic: topics.OffersCommands, SourcePartition: 1,
		SourceOffset: 2, Before: none, After: active})
	if applied || again.Active != 0 {
		t.Errorf("redelivery applied: %+v", again)
	}
	if _, applied := Apply(c, &schemas.CabinetChange{SellerID: "s", SourceTopic: topics.OffersCommands, SourcePartition: 2,
		SourceOffset: 0, Before: none, After: active}); !applied {
		t.Error("first change of another partition skipped")
	}
}

// TestApplyAgreesWithRecount drives random offers through random commands
// with the aggregate's Decide and checks that the cabinet applied from
// their changes, with every change delivered twice, equals a recount.
func TestApplyAgreesWithRecount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sellers := []string{"s1", "s2", "s3"}
	recs := map[string]*schemas.OfferRecord{}
	cabs := map[string]*schemas.SellerCabinet{}
	statuses := []schemas.OfferStatus{schemas.OfferActive, schemas.OfferInactive, schemas.OfferExpired, schemas.OfferSold}
	at := time.UnixMilli(1_800_000_000_000)
	for off := int64(0); off < 3000; off++ {
		id := offers.IDFrom(uint64(rng.IntN(60)))
		cur := recs[id]
		seller := sellers[int(id[3]-'0')%len(sellers)]
		p := int64(rng.IntN(1000))
		o := &schemas.Offer{Category: "c", Title: "t", Price: &p, Currency: "RUB", Status: statuses[rng.IntN(len(statuses))]}
		in := offers.Input{Topic: topics.OffersCommands, Partition: int32(off % 3), Offset: off, At: at.Add(time.Duration(off) * time.Second), Key: id}
		switch k := rng.IntN(10); {
		case cur == nil || k == 0:
			in.Command = &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: seller, ExpectedVersion: -1, Offer: o, DraftID: id}
		case k < 7:
			in.Command = &schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: seller, ExpectedVersion: -1, Offer: o}
		case k < 8:
			in.Command = &schemas.OfferCommand{Kind: schemas.CommandDelete, OfferID: id, SellerID: seller, ExpectedVersion: -1}
		default:
			in.Command = &schemas.OfferCommand{Kind: schemas.CommandModeration, OfferID: id, ExpectedVersion: -1,
				Opinion: &schemas.ModerationOpinion{OfferID: id, Banned: rng.IntN(2) == 0}}
		}
		d := offers.Decide(cur, in)
		if d.Record == nil {
			continue
		}
		recs[id] = d.Record
		r := d.Record
		ch := &schemas.CabinetChange{SellerID: seller, OfferID: id, SourceTopic: r.SourceTopic, SourcePartition: r.SourcePartition,
			SourceOffset: r.SourceOffset, Before: r.Previous, After: r.Summary}
		for range 2 {
			cabs[seller], _ = Apply(cabs[seller], ch)
		}
	}
	var all []*schemas.OfferRecord
	for _, r := range recs {
		all = append(all, r)
	}
	want := Recount(all)
	if len(want) != len(cabs) {
		t.Fatalf("%d sellers counted, %d applied", len(want), len(cabs))
	}
	for s, w := range want {
		if ok, diff := Equal(cabs[s], w); !ok {
			t.Errorf("applied != recount: %s", diff)
		}
	}
}

// TestMoneyNeverWraps: sums of prices saturate instead of wrapping, and a
// live count and a recount agree on it (the seed counts each sale once).
func TestMoneyNeverWraps(t *testing.T) {
	for _, tt := range []struct{ sum, price, want int64 }{
		{0, 5, 5},
		{math.MaxInt64 - 1, 5, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{7, -3, 7},
	} {
		if got := AddMoney(tt.sum, tt.price); got != tt.want {
			t.Errorf("AddMoney(%d, %d) = %d, want %d", tt.sum, tt.price, got, tt.want)
		}
	}
	var cab *schemas.SellerCabinet
	var recs []*schemas.OfferRecord
	for i := range 3 {
		p := int64(math.MaxInt64 / 2)
		r := &schemas.OfferRecord{Offer: schemas.Offer{ID: fmt.Sprint(i), SellerID: "s", Status: schemas.OfferSold, Price: &p},
			Billing: schemas.Billing{Sold: true, SoldPrice: p}}
		recs = append(recs, r)
		cab, _ = Apply(cab, &schemas.CabinetChange{SellerID: "s", OfferID: r.Offer.ID, SourcePartition: 0, SourceOffset: int64(i),
			After: offers.SummaryOf(r)})
	}
	if cab.MoneyEarned != math.MaxInt64 || cab.Sold != 3 {
		t.Errorf("live: sold %d for %d", cab.Sold, cab.MoneyEarned)
	}
	if ok, diff := Equal(cab, Recount(recs)["s"]); !ok {
		t.Errorf("live != recount: %s", diff)
	}
}
