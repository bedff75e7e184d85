package search

// slab holds one embedding's vectors of a partition's live documents, of
// unit length, one after the other in one array: a kNN scans it from
// start to end (no map ranged over, no vector a pointer away), which is
// what an exact kNN costs.
type slab struct {
	dim  int
	data []float32      // slot i is data[i*dim : (i+1)*dim]
	pks  []string       // slot -> pk; "" a free slot
	slot map[string]int // pk -> slot
	free []int
}

func newSlab(dim int) *slab { return &slab{dim: dim, slot: map[string]int{}} }

// set makes v (of s's dimension) pk's vector.
func (s *slab) set(pk string, v []float32) {
	i, ok := s.slot[pk]
	switch {
	case ok:
	case len(s.free) > 0:
		i, s.free = s.free[len(s.free)-1], s.free[:len(s.free)-1]
	default:
		i = len(s.pks)
		s.pks = append(s.pks, "")
		s.data = append(s.data, make([]float32, s.dim)...)
	}
	s.slot[pk], s.pks[i] = i, pk
	copy(s.data[i*s.dim:(i+1)*s.dim], v)
}

// remove drops pk's vector, if it has one.
func (s *slab) remove(pk string) {
	i, ok := s.slot[pk]
	if !ok {
		return
	}
	delete(s.slot, pk)
	s.pks[i] = ""
	s.free = append(s.free, i)
}

// get returns pk's vector, nil if it has none.
func (s *slab) get(pk string) []float32 {
	i, ok := s.slot[pk]
	if !ok {
		return nil
	}
	return s.data[i*s.dim : (i+1)*s.dim]
}

// scan calls fn with every pk and its vector's dot product with target
// (of s's dimension).
func (s *slab) scan(target []float32, fn func(pk string, dot float64)) {
	for i, pk := range s.pks {
		if pk == "" {
			continue
		}
		fn(pk, float64(dot(s.data[i*s.dim:(i+1)*s.dim:(i+1)*s.dim], target)))
	}
}

// dot is the dot product of a and b (of one length), four lanes at a
// time: the compiler neither vectorises nor reorders a float sum, and
// four independent sums keep the multiplier busy.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
