package offers

import (
	"math/rand/v2"
	"testing"
)

// TestPermutationIsOneToOne: every image is in the id space and its
// inverse gives the counter back, so two counters never share an id; the
// ids of consecutive counters are not neighbours, and another key gives
// other ids.
func TestPermutationIsOneToOne(t *testing.T) {
	p := NewPermutation([]byte("a key of sixteen bytes or more"))
	q := NewPermutation([]byte("another key, as long as that one"))
	check := func(n uint64) uint64 {
		v := p.Of(n)
		if v >= idSpace {
			t.Fatalf("image of %d is %d, past the id space", n, v)
		}
		if back := p.Inverse(v); back != n {
			t.Fatalf("inverse of the image of %d is %d", n, back)
		}
		return v
	}
	seen := map[uint64]uint64{}
	same, near := 0, 0
	var last uint64
	for n := range uint64(50_000) {
		v := check(n)
		if m, ok := seen[v]; ok {
			t.Fatalf("counters %d and %d share the image %d", m, n, v)
		}
		seen[v] = n
		if q.Of(n) == v {
			same++
		}
		if n > 0 && (v-last < 1000 || last-v < 1000) {
			near++
		}
		last = v
	}
	for _, n := range []uint64{idSpace - 1, idSpace - 2, idHalf*idHalf - idSpace, rand.Uint64N(idSpace), rand.Uint64N(idSpace)} {
		check(n)
	}
	// By chance: ~50 000 × 1/9·10⁹ and ~50 000 × 2000/9·10⁹.
	if same > 5 || near > 200 {
		t.Errorf("%d images shared by another key, %d consecutive counters with neighbouring ids", same, near)
	}
}

func TestBlocksSplitTheSpace(t *testing.T) {
	if s, ok := blockStart(0, 0); !ok || s != 0 {
		t.Errorf("first block %d %v", s, ok)
	}
	last := int64(idsPerPartition/IDBlock - 1)
	s, ok := blockStart(7, last)
	if !ok || s+IDBlock != idSpace {
		t.Errorf("last block of the last partition starts at %d (%v), ends at %d, want the end of the space %d", s, ok, s+IDBlock, idSpace)
	}
	if s, ok := blockStart(1, 0); !ok || s != idsPerPartition {
		t.Errorf("partition 1 starts at %d", s)
	}
	if _, ok := blockStart(0, last+1); ok {
		t.Error("a block past the partition's share given")
	}
	if _, ok := blockStart(8, 0); ok {
		t.Error("a block of a partition offers.ids does not have")
	}
}
