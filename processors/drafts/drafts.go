// Package drafts is the drafts group "drafts": at most one draft per owner,
// an owner being an anonymous visitor ("anon:ID") or a logged-in seller
// ("user:ID"), with the seed's rules for which draft a visitor gets back.
//
// A visitor both anonymous and logged in is served in three commands, all
// from the API, so that the log alone replays them: CURRENT keyed by the
// anonymous owner answers that owner's draft as it is; HAND keyed by the
// logged-in owner carries it there, where the rules pick the draft the
// seller keeps; DISCARD of the anonymous draft's id drops it. A crash
// between them loses nothing: the anonymous draft stays until handed.
// Every command is answered on drafts.results with its position, for the
// API's request/reply.
package drafts

import (
	"fmt"
	"strings"
	"time"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
)

// Owner key prefixes.
const (
	AnonPrefix = "anon:"
	UserPrefix = "user:"
)

// AnonKey and UserKey return the owner keys of an anonymous visitor and of
// a logged-in seller.
func AnonKey(id string) string { return AnonPrefix + id }

// UserKey returns the owner key of a logged-in seller.
func UserKey(id string) string { return UserPrefix + id }

// Key returns the key a command is sent with: the anonymous owner when
// there is one (it hands over to the user), the user otherwise.
func Key(c *schemas.DraftCommand) string {
	if c.Kind == schemas.DraftCurrent && c.Anon != "" {
		return AnonKey(c.Anon)
	}
	if c.User != "" {
		return UserKey(c.User)
	}
	return AnonKey(c.Anon)
}

// Resolve returns the draft a visitor gets, from the anonymous owner's
// draft anon and the logged-in owner's draft user (either may be nil),
// following the seed:
//   - a category is asked and neither draft has it: one draft is reset to
//     an empty draft of that category keeping its id, the logged-in one
//     first;
//   - exactly one draft has it: that one;
//   - both have it, or no category is asked: the one updated last (the
//     logged-in one on a tie);
//   - no draft: a new one with id newID.
//
// The result belongs to owner (the logged-in owner when there is one: the
// draft moves to them and the other is dropped). at is the request's time.
func Resolve(anon, user *schemas.Draft, category, owner, newID string, at time.Time) *schemas.Draft {
	var cands []*schemas.Draft
	for _, d := range []*schemas.Draft{user, anon} {
		if d != nil {
			cands = append(cands, d)
		}
	}
	var pick *schemas.Draft
	switch {
	case len(cands) == 0:
		return fresh(newID, category, owner, 0, at)
	case category != "":
		var match []*schemas.Draft
		for _, d := range cands {
			if d.Category == category {
				match = append(match, d)
			}
		}
		switch len(match) {
		case 0:
			return fresh(cands[0].ID, category, owner, cands[0].Version, at)
		case 1:
			pick = match[0]
		default:
			pick = newest(match)
		}
	default:
		pick = newest(cands)
	}
	out := *pick
	if out.Owner != owner {
		out.Owner = owner
		out.Offer.SellerID = sellerOf(owner)
		out.Version++
	}
	return &out
}

func newest(ds []*schemas.Draft) *schemas.Draft {
	best := ds[0]
	for _, d := range ds[1:] {
		if d.UpdatedAt.After(best.UpdatedAt) {
			best = d
		}
	}
	return best
}

func fresh(id, category, owner string, version int64, at time.Time) *schemas.Draft {
	return &schemas.Draft{ID: id, Owner: owner, Category: category, UpdatedAt: at, Version: version + 1,
		Offer: schemas.Offer{ID: id, SellerID: sellerOf(owner), Category: category, Attributes: schemas.Attributes{}, Photos: []schemas.Photo{}}}
}

// sellerOf returns the seller id of a logged-in owner key, "" for others.
func sellerOf(owner string) string {
	id, _ := strings.CutPrefix(owner, UserPrefix)
	if id == owner {
		return ""
	}
	return id
}

// Save returns cur with its content replaced by d's, or the outcome that
// refuses it: a draft is saved only over the owner's current draft of the
// same id (another id means it was replaced meanwhile: CONFLICT).
func Save(cur *schemas.Draft, d *schemas.Draft, owner string, at time.Time) (*schemas.Draft, schemas.Outcome, string) {
	switch {
	case d == nil:
		return nil, schemas.OutcomeInvalid, "draft: missing"
	case cur == nil:
		return nil, schemas.OutcomeNotFound, fmt.Sprintf("%s has no draft", owner)
	case cur.ID != d.ID:
		return nil, schemas.OutcomeConflict, fmt.Sprintf("the current draft of %s is %s, not %s", owner, cur.ID, d.ID)
	case len(d.Offer.Title) > 4*offers.MaxTitle || len(d.Offer.Photos) > offers.MaxPhotos:
		return nil, schemas.OutcomeInvalid, "offer: title or photos beyond the limits"
	}
	next := *cur
	next.Offer = d.Offer
	next.Offer.ID, next.Offer.SellerID = cur.ID, sellerOf(owner)
	if next.Offer.Category != "" {
		next.Category = next.Offer.Category
	}
	next.Offer.Category = next.Category
	next.UpdatedAt = at
	next.Version++
	return &next, schemas.OutcomeOK, ""
}
