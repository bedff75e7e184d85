package drafts

import (
	"testing"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func draft(id, owner, category string, updated int) *schemas.Draft {
	return &schemas.Draft{ID: id, Owner: owner, Category: category, UpdatedAt: t0.Add(time.Duration(updated) * time.Minute),
		Version: 3, Offer: schemas.Offer{ID: id, SellerID: sellerOf(owner), Category: category, Title: "t-" + id}}
}

func TestResolve(t *testing.T) {
	const anon, user, newID = "anon:a", "user:u", "NEW"
	tests := []struct {
		name       string
		anon, user *schemas.Draft
		category   string
		owner      string
		wantID     string
		wantTitle  string // "" for a reset or new draft
		wantCat    string
	}{
		{"nothing: a new draft", nil, nil, "cars", user, newID, "", "cars"},
		{"anonymous only, no category", draft("A", anon, "cars", 1), nil, "", anon, "A", "t-A", "cars"},
		{"anonymous only, its category", draft("A", anon, "cars", 1), nil, "cars", anon, "A", "t-A", "cars"},
		{"anonymous only, other category: reset keeping the id", draft("A", anon, "cars", 1), nil, "flats", anon, "A", "", "flats"},
		{"logged in only, other category: reset keeping the id", nil, draft("U", user, "cars", 1), "flats", user, "U", "", "flats"},
		{"both, neither matches: the logged-in one is reset", draft("A", anon, "cars", 5), draft("U", user, "cars", 1), "flats", user, "U", "", "flats"},
		{"both, only the anonymous matches: it moves to the user", draft("A", anon, "flats", 1), draft("U", user, "cars", 5), "flats", user, "A", "t-A", "flats"},
		{"both, only the logged-in matches", draft("A", anon, "flats", 5), draft("U", user, "cars", 1), "cars", user, "U", "t-U", "cars"},
		{"both match: the newest", draft("A", anon, "cars", 5), draft("U", user, "cars", 1), "cars", user, "A", "t-A", "cars"},
		{"no category: the newest", draft("A", anon, "cars", 1), draft("U", user, "flats", 5), "", user, "U", "t-U", "flats"},
		{"no category, a tie: the logged-in one", draft("A", anon, "cars", 1), draft("U", user, "flats", 1), "", user, "U", "t-U", "flats"},
	}
	for _, tt := range tests {
		d := Resolve(tt.anon, tt.user, tt.category, tt.owner, newID, t0)
		if d.ID != tt.wantID || d.Offer.Title != tt.wantTitle || d.Category != tt.wantCat || d.Owner != tt.owner {
			t.Errorf("%s: got %s %q %s owner %s", tt.name, d.ID, d.Offer.Title, d.Category, d.Owner)
		}
		if tt.owner == user && d.Offer.SellerID != "u" {
			t.Errorf("%s: seller %q", tt.name, d.Offer.SellerID)
		}
	}
	// Inputs are not modified.
	a := draft("A", anon, "flats", 1)
	Resolve(a, nil, "flats", user, newID, t0)
	if a.Owner != anon {
		t.Error("Resolve changed its input")
	}
}

func TestSave(t *testing.T) {
	cur := draft("U", "user:u", "cars", 1)
	in := &schemas.Draft{ID: "U", Offer: schemas.Offer{Title: "new title", Category: "flats"}}
	d, outcome, _ := Save(cur, in, "user:u", t0.Add(time.Hour))
	if outcome != schemas.OutcomeOK || d.Offer.Title != "new title" || d.Category != "flats" || d.Version != 4 ||
		d.Offer.SellerID != "u" || d.Offer.ID != "U" || !d.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("save: %s %+v", outcome, d)
	}
	if _, outcome, _ := Save(cur, &schemas.Draft{ID: "X"}, "user:u", t0); outcome != schemas.OutcomeConflict {
		t.Errorf("save over another draft: %s", outcome)
	}
	if _, outcome, _ := Save(nil, in, "user:u", t0); outcome != schemas.OutcomeNotFound {
		t.Errorf("save with no draft: %s", outcome)
	}
}

func TestKeyAndCheck(t *testing.T) {
	c := &schemas.DraftCommand{Kind: schemas.DraftCurrent, Anon: "a", User: "u", NewID: "10000000009"}
	if Key(c) != "anon:a" {
		t.Errorf("current with both owners keyed %s", Key(c))
	}
	c.Kind = schemas.DraftSave
	if Key(c) != "user:u" {
		t.Errorf("save keyed %s", Key(c))
	}
	bad := []*schemas.DraftCommand{
		{Kind: schemas.DraftCurrent, NewID: "10000000009"},
		{Kind: schemas.DraftCurrent, Anon: "a/b", NewID: "10000000009"},
		{Kind: schemas.DraftCurrent, Anon: "a", NewID: "1"},
		{Kind: "MERGE", Anon: "a"},
	}
	for _, c := range bad {
		if check(c, Key(c)) == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := check(&schemas.DraftCommand{Kind: schemas.DraftSave, User: "u"}, "user:x"); err == nil {
		t.Error("command under another owner's key accepted")
	}
}
