package search

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bsearch "github.com/blevesearch/bleve/v2/search"
)

// TestTopKKeepsTheBest: the heap keeps the K best of what it is given, by
// score then pk, whatever the order they come in.
func TestTopKKeepsTheBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []*bsearch.DocumentMatch
	for i := range 500 {
		all = append(all, &bsearch.DocumentMatch{ID: fmt.Sprint(i), Score: float64(rng.IntN(50))})
	}
	for _, k := range []int{1, 7, 500, 600} {
		top := newTopK(k)
		for _, m := range all {
			top.add(m.ID, m.Score)
		}
		want := slices.Clone(all)
		slices.SortFunc(want, byScore)
		want = want[:min(k, len(want))]
		got := top.sorted()
		if len(got) != len(want) {
			t.Fatalf("k %d: %d kept, want %d", k, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Score != want[i].Score {
				t.Fatalf("k %d: %d-th %v, want %v", k, i, got[i], want[i])
			}
		}
	}
}
