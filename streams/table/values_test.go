package table

import (
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/offerlog/offerlog/streams"
)

// A store that cannot be read fails a batch's reads fatally: its records
// are not at fault and must not become dead letters.
func TestABrokenStoreFailsTheBatchFatally(t *testing.T) {
	db, err := OpenPebble(t.TempDir(), 1<<20, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("k"), []byte("v"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	b := &Update{g: &Group{Table: "t"}, st: &tableStore{db: db}, sets: map[string][]byte{"set": []byte("s")}}
	vals, err := b.Values([]string{"k", "set", "none", "k"})
	if err != nil || string(vals["k"]) != "v" || string(vals["set"]) != "s" || len(vals) != 2 {
		t.Fatalf("values %q, %v; want k and set", vals, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Pebble panics on a closed store.
	if vals, err := b.Values([]string{"k"}); !streams.IsFatal(err) || vals != nil {
		t.Fatalf("values of a closed store: %q, %v; want a fatal error", vals, err)
	}
	// What the batch set is still answered without the store.
	if vals, err := b.Values([]string{"set"}); err != nil || string(vals["set"]) != "s" {
		t.Fatalf("values %q, %v; want the batch's own", vals, err)
	}
}
