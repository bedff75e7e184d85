package offers

import (
	"slices"
	"testing"

	"github.com/offerlog/offerlog/schemas"
)

// Each field of Fields, changed alone, is the one ChangedFields names; a
// record compared with itself changed nothing, and a new one everything.
func TestChangedFieldsNamesEachFieldAlone(t *testing.T) {
	price, other := int64(100), int64(200)
	base := func() *schemas.OfferRecord {
		return &schemas.OfferRecord{Offer: schemas.Offer{Category: "cars", Title: "t", Description: "d", Price: &price, Currency: "RUB",
			Attributes: []schemas.Attribute{{Name: "a", Value: "1"}}, Photos: []schemas.Photo{{SourceURL: "p"}}, Status: "ACTIVE"},
			Moderation: schemas.Moderation{Reasons: []string{}}}
	}
	change := map[string]func(r *schemas.OfferRecord){
		"category":    func(r *schemas.OfferRecord) { r.Offer.Category = "bikes" },
		"title":       func(r *schemas.OfferRecord) { r.Offer.Title = "u" },
		"description": func(r *schemas.OfferRecord) { r.Offer.Description = "e" },
		"price":       func(r *schemas.OfferRecord) { r.Offer.Price = &other },
		"currency":    func(r *schemas.OfferRecord) { r.Offer.Currency = "USD" },
		"attributes":  func(r *schemas.OfferRecord) { r.Offer.Attributes = nil },
		"photos":      func(r *schemas.OfferRecord) { r.Offer.Photos = []schemas.Photo{{SourceURL: "q"}} },
		"status":      func(r *schemas.OfferRecord) { r.Offer.Status = "INACTIVE" },
		"moderation":  func(r *schemas.OfferRecord) { r.Moderation.Banned = true },
	}
	if len(change) != len(Fields) {
		t.Fatalf("%d fields changed here, Fields has %d", len(change), len(Fields))
	}
	for _, f := range Fields {
		next := base()
		change[f](next)
		if got := ChangedFields(base(), next); !slices.Equal(got, []string{f}) {
			t.Errorf("%s changed: ChangedFields says %v", f, got)
		}
	}
	if got := ChangedFields(base(), base()); len(got) != 0 {
		t.Errorf("nothing changed: ChangedFields says %v", got)
	}
	if got := ChangedFields(nil, base()); !slices.Equal(got, Fields) {
		t.Errorf("a new offer: ChangedFields says %v", got)
	}
}
