package search

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bsearch "github.com/blevesearch/bleve/v2/search"

	"github.com/offerlog/offerlog/schemas"
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

// TestFieldsOfEpochs: the latest epoch's type wins; the string fields a
// query without fields asks are those whose latest type is a string, in
// the order of their first declaration, a field that became one too; a
// field's words are asked with every analyzer its epochs read it with.
func TestFieldsOfEpochs(t *testing.T) {
	f := fieldsOf([]*schemas.EpochSchema{
		{Epoch: 2, Analyzer: schemas.AnalyzerRussian, Fields: []schemas.FieldSpec{{Name: "size", Type: schemas.TypeString},
			{Name: "title", Type: schemas.TypeString}, {Name: "code", Type: schemas.TypeInt64}}},
		{Epoch: 1, Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString}, {Name: "size", Type: schemas.TypeInt64},
			{Name: "code", Type: schemas.TypeString}}},
	})
	if !slices.Equal(f.words, []string{"title", "size"}) || f.types["code"] != schemas.TypeInt64 {
		t.Errorf("words %v, code %s", f.words, f.types["code"])
	}
	if got := f.analyzers["title"]; !slices.Equal(got, []string{schemas.AnalyzerStandard, schemas.AnalyzerRussian}) {
		t.Errorf("title's analyzers %v", got)
	}
}
