package search

import (
	"math"
	"slices"
	"testing"
)

// TestSlab: vectors set, replaced, removed and their slots reused; a scan
// sees each live pk once with its dot product.
func TestSlab(t *testing.T) {
	s := newSlab(5)
	s.set("a", []float32{1, 0, 0, 0, 0})
	s.set("b", []float32{0, 1, 0, 0, 1})
	s.set("c", []float32{1, 1, 1, 1, 1})
	s.set("a", []float32{0, 0, 0, 0, 2}) // replaced in its slot
	s.remove("b")
	s.remove("nobody")
	s.set("d", []float32{3, 0, 0, 0, 0}) // takes b's slot
	if len(s.pks) != 3 {
		t.Errorf("%d slots for three vectors", len(s.pks))
	}
	got := map[string]float64{}
	s.scan([]float32{1, 2, 3, 4, 5}, func(pk string, d float64) { got[pk] = d })
	want := map[string]float64{"a": 10, "c": 15, "d": 3}
	for pk, d := range want {
		if math.Abs(got[pk]-d) > 1e-6 {
			t.Errorf("%s: %v, want %v", pk, got[pk], d)
		}
	}
	if len(got) != len(want) || s.get("b") != nil || !slices.Equal(s.get("d"), []float32{3, 0, 0, 0, 0}) {
		t.Errorf("scan %v, b %v, d %v", got, s.get("b"), s.get("d"))
	}
}
