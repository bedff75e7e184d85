package offerv1

import (
	"time"

	"github.com/offerlog/offerlog/schemas"
)

// This file is written by hand (make proto regenerates only *.pb.go): the
// conversions between the Avro offer of the log and its protobuf form, used
// by the offer API and the stage API alike.

// FromOffer returns the protobuf form of an offer.
func FromOffer(o *schemas.Offer) *Offer {
	out := &Offer{Id: o.ID, SellerId: o.SellerID, Category: o.Category, Title: o.Title, Description: o.Description,
		Price: o.Price, Currency: o.Currency, Attributes: o.Attributes.Map(), Status: string(o.Status), ExternalId: o.ExternalID,
		CreatedAtMs: Millis(o.CreatedAt), UpdatedAtMs: Millis(o.UpdatedAt), ExposedMs: o.ExposedMs, ExposedSinceMs: o.ExposedSince}
	for _, p := range o.Photos {
		out.Photos = append(out.Photos, &Photo{SourceUrl: p.SourceURL, Url: p.URL, Status: string(p.Status), Error: p.Error})
	}
	return out
}

// ToOffer returns the content of a written offer; server-kept fields (ids,
// times, photo processing) are not taken from the request. nil for nil.
func ToOffer(o *Offer) *schemas.Offer {
	if o == nil {
		return nil
	}
	out := &schemas.Offer{Category: o.Category, Title: o.Title, Description: o.Description, Price: o.Price,
		Currency: o.Currency, Attributes: schemas.AttributesOf(o.Attributes), Status: schemas.OfferStatus(o.Status), Photos: []schemas.Photo{}}
	for _, p := range o.Photos {
		out.Photos = append(out.Photos, schemas.Photo{SourceURL: p.SourceUrl})
	}
	return out
}

// Millis returns t in Unix milliseconds, 0 for the zero time.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
