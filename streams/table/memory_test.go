package table

import (
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

// The process's block cache is shared by its open stores and freed with
// the last of them; the next store makes a new one.
func TestTheBlockCacheGoesWithTheLastStore(t *testing.T) {
	open := func() *pebble.DB {
		t.Helper()
		db, err := OpenPebble(t.TempDir(), 1<<20, 4<<20, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	held := func() (*pebble.Cache, int) {
		processCache.Lock()
		defer processCache.Unlock()
		return processCache.cache, processCache.stores
	}
	_, before := held() // stores other tests left open (a crash test's)
	a, b := open(), open()
	shared, n := held()
	if n != before+2 || shared == nil {
		t.Fatalf("%d stores hold the cache, want %d", n, before+2)
	}
	if err := ClosePebble(a); err != nil {
		t.Fatal(err)
	}
	if c, n := held(); c != shared || n != before+1 {
		t.Fatalf("one store closed: cache %p (was %p), %d stores", c, shared, n)
	}
	if err := ClosePebble(b); err != nil {
		t.Fatal(err)
	}
	c, n := held()
	if n != before || (before == 0) != (c == nil) {
		t.Fatalf("both closed: cache %p, %d stores; want %d, freed with the last", c, n, before)
	}
	if before == 0 {
		d := open()
		defer func() { _ = ClosePebble(d) }()
		if c, _ := held(); c == nil || c == shared {
			t.Fatalf("a store opened after: cache %p, the freed one %p", c, shared)
		}
	}
}
