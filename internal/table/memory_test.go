package table

import "testing"

func TestStoresStayWithinTheirShareOfTheBudget(t *testing.T) {
	for _, budget := range []int64{256 << 20, 1 << 30, 8 << 30} {
		per := StoreMemoryOf(budget/2, 18, 8)
		cache, memtable := pebbleMemory(per)
		// The block cache and two memtables (filling and flushing).
		if worst := cache + 2*memtable; worst > max(per, 3<<20) {
			t.Errorf("budget %d: a store may take %d, its share is %d", budget, worst, per)
		}
	}
}
