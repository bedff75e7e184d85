package table

import "testing"

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
