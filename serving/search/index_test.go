package search

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"

	"github.com/offerlog/offerlog/schemas"
)

// TestAnIndexOfAnotherLayoutIsRebuilt: an index an older searcher built
// (another layout: its strings mapped otherwise) is not read as if it were
// this one's: it opens empty, from the feed's start.
func TestAnIndexOfAnotherLayoutIsRebuilt(t *testing.T) {
	dir := t.TempDir() + "/0"
	idx, err := openIndex(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Index("pk", map[string]any{fieldVersion: 1.0}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{string(appliedKey), "\x00\x00\x00\x00\x00\x00\x00\x07"}, {string(layoutKey), "1"}} {
		if err := idx.SetInternal([]byte(kv[0]), []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := openPart(dir, "shop", 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	n, err := p.idx.DocCount()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := p.idx.GetInternal(layoutKey)
	if at, _ := p.position(); n != 0 || at != 0 || string(v) != layout {
		t.Errorf("reopened: %d documents, position %d, layout %q; want an empty index of layout %s", n, at, v, layout)
	}
}

// TestRestrictByIDsAndByRange: the documents past their TTL are left out
// alike whether they are named one by one or asked of the index by range.
func TestRestrictByIDsAndByRange(t *testing.T) {
	p, err := openPart(t.TempDir()+"/0", "shop", 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	var changes []change
	for i, at := range []*time.Time{nil, &past, &future, &past, nil} {
		title := "lamp"
		d := &schemas.SaasDocument{PK: fmt.Sprint(i), Version: 1, Epoch: 1, ExpiresAt: at,
			Fields: []schemas.Field{{Name: "title", String: &title}}}
		changes = append(changes, change{pk: d.PK, version: 1, doc: d})
	}
	if err := p.apply(changes, int64(len(changes))); err != nil {
		t.Fatal(err)
	}
	q := bleve.NewTermQuery("lamp")
	q.SetField(exactPath("title"))
	for _, most := range []int{0, 1000} {
		res, err := p.idx.Search(bleve.NewSearchRequest(p.restrictNaming(q, now, most)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range res.Hits {
			got = append(got, h.ID)
		}
		if slices.Sort(got); !slices.Equal(got, []string{"0", "2", "4"}) {
			t.Errorf("naming at most %d: %v, want 0 2 4", most, got)
		}
	}
}
