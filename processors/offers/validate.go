package offers

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/offerlog/offerlog/schemas"
)

// Limits of an offer, checked by Validate.
const (
	MaxTitle       = 200
	MaxDescription = 20_000
	MaxPhotos      = 30
	MaxURL         = 2048
	MaxAttributes  = 100
	MaxAttrKey     = 64
	MaxAttrValue   = 1024
	// MaxOfferBytes is the seed's limit on an offer's size (100 KB),
	// counted over its text.
	MaxOfferBytes = 100 << 10
)

// FieldError is a rejected input: the field at fault (as named in JSON) and
// why.
type FieldError struct {
	Field  string
	Reason string
}

// MaxPrice is the largest price an offer may have, in minor units of its
// currency (10^15: ten trillion roubles in kopecks). Sums of prices are
// accumulated with overflow checks (cabinet.AddMoney) as well.
const MaxPrice = 1_000_000_000_000_000

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

var (
	sellerID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	category = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	currency = regexp.MustCompile(`^[A-Z]{3}$`)
)

// ValidSeller returns an error unless id is usable as a seller id: 1 to 64
// of A-Z, a-z, 0-9, '_', '.' and '-' (it is part of topic keys and of the
// cabinet's ordering keys, so no '/').
func ValidSeller(id string) *FieldError {
	if !sellerID.MatchString(id) {
		return fieldErr("seller_id", "want 1-64 characters of A-Z, a-z, 0-9, '_', '.' or '-', got %q", id)
	}
	return nil
}

// Validate returns the first problem of an offer as a seller writes it, or
// nil. Status may be empty (kept, or ACTIVE for a new offer) or any status
// but DELETED, which only a delete sets.
func Validate(o *schemas.Offer) *FieldError {
	if e := ValidSeller(o.SellerID); e != nil {
		return e
	}
	size := 0
	text := func(field, v string, required bool, max int) *FieldError {
		size += len(v)
		switch {
		case required && strings.TrimSpace(v) == "":
			return fieldErr(field, "required")
		case !utf8.ValidString(v):
			return fieldErr(field, "not valid UTF-8")
		case utf8.RuneCountInString(v) > max:
			return fieldErr(field, "longer than %d characters", max)
		}
		return nil
	}
	if !category.MatchString(o.Category) {
		return fieldErr("category", "want 1-64 characters of a-z, 0-9, '_', '.' or '-', got %q", o.Category)
	}
	if e := text("title", o.Title, true, MaxTitle); e != nil {
		return e
	}
	if e := text("description", o.Description, false, MaxDescription); e != nil {
		return e
	}
	if o.Price != nil {
		if *o.Price < 0 || *o.Price > MaxPrice {
			return fieldErr("price", "want 0 to %d (minor units of the currency), got %d", int64(MaxPrice), *o.Price)
		}
		if !currency.MatchString(o.Currency) {
			return fieldErr("currency", "want an ISO 4217 code such as RUB with a price, got %q", o.Currency)
		}
	} else if o.Currency != "" {
		return fieldErr("currency", "given without a price")
	}
	switch o.Status {
	case "", schemas.OfferActive, schemas.OfferInactive, schemas.OfferExpired, schemas.OfferSold:
	default:
		return fieldErr("status", "want ACTIVE, INACTIVE, EXPIRED or SOLD, got %q", o.Status)
	}
	if len(o.Photos) > MaxPhotos {
		return fieldErr("photos", "more than %d", MaxPhotos)
	}
	seen := map[string]bool{}
	for i, p := range o.Photos {
		field := fmt.Sprintf("photos[%d].source_url", i)
		if !strings.HasPrefix(p.SourceURL, "https://") && !strings.HasPrefix(p.SourceURL, "http://") {
			return fieldErr(field, "want an http(s) URL, got %q", p.SourceURL)
		}
		if e := text(field, p.SourceURL, true, MaxURL); e != nil {
			return e
		}
		if seen[p.SourceURL] {
			return fieldErr(field, "given twice")
		}
		seen[p.SourceURL] = true
	}
	if len(o.Attributes) > MaxAttributes {
		return fieldErr("attributes", "more than %d", MaxAttributes)
	}
	for i, a := range o.Attributes {
		if e := text("attributes", a.Name, true, MaxAttrKey); e != nil {
			return fieldErr("attributes."+a.Name, "name: %s", e.Reason)
		}
		if i > 0 && o.Attributes[i-1].Name >= a.Name {
			return fieldErr("attributes."+a.Name, "attributes out of order or given twice")
		}
		if e := text("attributes."+a.Name, a.Value, false, MaxAttrValue); e != nil {
			return e
		}
	}
	if e := text("external_id", o.ExternalID, false, 256); e != nil {
		return e
	}
	if size > MaxOfferBytes {
		return fieldErr("offer", "%d bytes of text, more than %d", size, MaxOfferBytes)
	}
	return nil
}
