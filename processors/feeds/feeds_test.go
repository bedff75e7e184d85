package feeds

import (
	"errors"
	"fmt"
	"testing"

	"github.com/offerlog/offerlog/schemas"
)

func item(seller, ext string, task int64, title string) schemas.FeedItem {
	return schemas.FeedItem{SellerID: seller, ExternalID: ext, TaskID: task, Offer: &schemas.Offer{Category: "cars", Title: title}}
}

func TestPlan(t *testing.T) {
	index := map[string]schemas.FeedEntry{
		"s/matched": {SellerID: "s", ExternalID: "matched", OfferID: "O-matched", TaskID: 3},
		"s/newer":   {SellerID: "s", ExternalID: "newer", OfferID: "O-newer", TaskID: 9},
	}
	lookup := func(k string) (schemas.FeedEntry, bool, error) { e, ok := index[k]; return e, ok, nil }
	n := 0
	newID := func() string { n++; return fmt.Sprint("N", n) } // drawn for the creates only
	run := []schemas.FeedItem{
		item("s", "fresh", 5, "fresh"),
		item("s", "matched", 5, "first"),
		item("s", "newer", 5, "ignored"),     // the index has task 9
		item("s", "matched", 4, "older"),     // an older task in the same run
		item("s", "twice", 5, "one"),         //
		item("s", "twice", 5, "two"),         // the last of one task wins
		item("other", "matched", 5, "other"), // another seller's id space
	}
	cmds, older, err := Plan(run, lookup, newID)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind  schemas.CommandKind
		id    string
		title string
	}
	exp := []want{
		{schemas.CommandCreate, "N1", "fresh"},
		{schemas.CommandFeedUpsert, "O-matched", "first"},
		{schemas.CommandCreate, "N2", "two"},
		{schemas.CommandCreate, "N3", "other"},
	}
	if older != 1 || len(cmds) != len(exp) {
		t.Fatalf("%d older, %d commands: %+v", older, len(cmds), cmds)
	}
	for i, w := range exp {
		c := cmds[i]
		if c.Kind != w.kind || c.OfferID != w.id || c.Offer.Title != w.title || c.TaskID != 5 {
			t.Errorf("command %d: %s %s %q task %d, want %+v", i, c.Kind, c.OfferID, c.Offer.Title, c.TaskID, w)
		}
	}
	if _, _, err := Plan(run, func(string) (schemas.FeedEntry, bool, error) { return schemas.FeedEntry{}, false, errors.New("down") }, newID); err == nil {
		t.Error("a failing index was not reported")
	}
}

func TestCheck(t *testing.T) {
	ok := item("s", "x", 1, "t")
	if err := check(&ok, "s"); err != nil {
		t.Fatal(err)
	}
	end := schemas.FeedItem{SellerID: "s", TaskID: 2, End: true}
	if err := check(&end, "s"); err != nil {
		t.Fatalf("end marker: %v", err)
	}
	bad := []struct {
		it  schemas.FeedItem
		key string
	}{
		{item("s", "x", 1, "t"), "other"},
		{item("a/b", "x", 1, "t"), "a/b"},
		{item("s", "x", 0, "t"), "s"},
		{item("s", "", 1, "t"), "s"},
		{schemas.FeedItem{SellerID: "s", ExternalID: "x", TaskID: 1}, "s"},
	}
	for _, b := range bad {
		if check(&b.it, b.key) == nil {
			t.Errorf("%+v under %q accepted", b.it, b.key)
		}
	}
}
