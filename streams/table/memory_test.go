package table

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble"
)

func TestStoresStayWithinTheirShareOfTheBudget(t *testing.T) {
	const tables, partitions = 18, 8
	for _, budget := range []int64{256 << 20, 1 << 30, 8 << 30} {
		per := StoreMemoryOf(budget/2, tables, partitions)
		cache, memtable := pebbleMemory(per)
		// The block cache and two memtables (filling and flushing).
		if worst := cache + 2*memtable; worst > max(per, 3<<20) {
			t.Errorf("budget %d: a store may take %d, its share is %d", budget, worst, per)
		}
		// The process's one cache and every store's memtables.
		n := int64(tables * partitions)
		shared := CacheMemoryOf(budget/2, tables, partitions)
		if worst := shared + 2*memtable*n; worst > max(budget/2, n*(3<<20)) {
			t.Errorf("budget %d: the stores may take %d, their half is %d", budget, worst, budget/2)
		}
		if shared < n*(512<<10) {
			t.Errorf("budget %d: a cache of %d for %d stores", budget, shared, n)
		}
	}
	if CacheMemoryOf(0, tables, partitions) != 0 {
		t.Error("no budget: want the default cache (0)")
	}
}

// The stores of a process share the block cache its Config carries: what
// one store reads into it is counted in every store's cache; a store
// without one has its own.
func TestStoresShareTheProcesssBlockCache(t *testing.T) {
	cache := NewBlockCache(4 << 20)
	open := func(c *BlockCache) *pebble.DB {
		t.Helper()
		db, err := OpenPebble(t.TempDir(), 1<<20, c, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	a, b, own := open(cache), open(cache), open(nil)
	cache.Close() // the stores keep it
	for i := range 1000 {
		if err := a.Set(fmt.Appendf(nil, "k%04d", i), make([]byte, 100), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, closer, err := a.Get(fmt.Appendf(nil, "k%04d", i)); err != nil {
			t.Fatal(err)
		} else {
			closer.Close()
		}
	}
	if n := a.Metrics().BlockCache.Count; n == 0 {
		t.Fatal("reads put no block in the cache")
	}
	if na, nb := a.Metrics().BlockCache.Count, b.Metrics().BlockCache.Count; na != nb {
		t.Errorf("a's cache holds %d blocks, b's %d: not one cache", na, nb)
	}
	if n := own.Metrics().BlockCache.Count; n != 0 {
		t.Errorf("a store with a cache of its own holds %d blocks of another's reads", n)
	}
	for _, db := range []*pebble.DB{a, b, own} {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
