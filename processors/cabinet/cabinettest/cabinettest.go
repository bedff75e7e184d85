// Package cabinettest holds the seller cabinet's fixtures for tests of
// other packages.
package cabinettest

import (
	"testing"

	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/schemas"
)

// Recount checks the cabinet's table against a recount of the offers'
// table (cabinet.Recount): every seller's counters and presets are what
// its offers imply. It returns how many sellers it compared.
func Recount(t testing.TB, offersTable, cabinetTable map[string][]byte) int {
	t.Helper()
	var recs []*schemas.OfferRecord
	for _, v := range offersTable {
		var r schemas.OfferRecord
		if err := schemas.OfferRecords.Decode(v, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &r)
	}
	want := cabinet.Recount(recs)
	parts := map[string]*schemas.SellerCabinet{}
	for k, v := range cabinetTable {
		var c schemas.SellerCabinet
		if err := schemas.SellerCabinets.Decode(v, &c); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		parts[k] = &c
	}
	got := cabinet.Merge(parts)
	if len(want) != len(got) {
		t.Errorf("%d sellers in the cabinet, %d in the offers", len(got), len(want))
	}
	for seller, w := range want {
		g := got[seller]
		if g == nil {
			t.Errorf("seller %s has offers and no cabinet", seller)
			continue
		}
		if ok, diff := cabinet.Equal(g, w); !ok {
			t.Errorf("cabinet != recount: %s", diff)
		}
	}
	return len(want)
}
