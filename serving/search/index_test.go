package search

import (
	"log/slog"
	"testing"
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
	if err := idx.Index("pk", map[string]any{fieldLive: true}); err != nil {
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
