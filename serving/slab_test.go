package serving

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestSlabStoreIsAMap runs random sets and deletes of a few hundred keys,
// with values of every size, against a map: every key reads the same at
// every step, values handed out before never change, and the slabs' dead
// bytes stay bounded however many updates (slabs of 1 KiB, so that the
// oldest is moved again and again).
func TestSlabStoreIsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := newSlabStore(0, 1<<10)
	want := map[string][]byte{}
	type handed struct {
		key   string
		value []byte // as Get answered it
		copy  []byte
	}
	var out []handed
	for step := range 200_000 {
		key := fmt.Sprintf("k%d", rng.IntN(300))
		switch rng.IntN(10) {
		case 0:
			s.Delete(key)
			delete(want, key)
		default:
			v := bytes.Repeat([]byte{byte(step)}, rng.IntN(3000)) // some larger than a slab
			s.Set(key, v)
			if len(v) > 0 {
				v[0]++ // the store keeps its own copy
			}
			want[key] = bytes.Repeat([]byte{byte(step)}, len(v))
		}
		if step%997 == 0 {
			for k, w := range want {
				got, ok, _ := s.Get(k)
				if !ok || !bytes.Equal(got, w) {
					t.Fatalf("step %d: %s reads %v (%d bytes), want %d bytes", step, k, ok, len(got), len(w))
				}
				if len(out) < 1000 {
					out = append(out, handed{k, got, bytes.Clone(got)})
				}
			}
			if _, ok, _ := s.Get("absent"); ok {
				t.Fatal("a key never set is found")
			}
			if s.Len() != len(want) {
				t.Fatalf("step %d: %d keys, want %d", step, s.Len(), len(want))
			}
			if total, dead := s.Bytes(); dead*2 > total+2*(3000+recordHeader+8) {
				t.Fatalf("step %d: %d dead bytes of %d", step, dead, total)
			}
		}
	}
	for _, h := range out {
		if !bytes.Equal(h.value, h.copy) {
			t.Fatalf("a value of %s handed out before changed", h.key)
		}
	}
}

// TestSlabStoreCostsItsRecords: 50 000 offers of 606 bytes take at most
// 1.25 times their keys and values in heap (a map of the fetched records
// took 2.4 to 4.4 times).
func TestSlabStoreCostsItsRecords(t *testing.T) {
	const n, size = 50_000, 606
	before := heapInUse()
	s := newSlabStore(0, 0)
	value := bytes.Repeat([]byte("x"), size)
	var records int64
	for i := range n {
		key := fmt.Sprintf("%011d", i)
		s.Set(key, value)
		records += int64(len(key) + size)
	}
	used := heapInUse() - before
	runtime.KeepAlive(s)
	if used > records*5/4 {
		t.Errorf("%d offers of %d bytes: %d bytes of heap, %.2f times their records (want at most 1.25)", n, size, used, float64(used)/float64(records))
	}
	t.Logf("%d offers: %.0f bytes of heap each, %.2f times the record", n, float64(used)/n, float64(used)/float64(records))
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
