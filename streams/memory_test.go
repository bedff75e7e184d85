package streams

import "testing"

func TestStoresStayWithinTheirShareOfTheBudget(t *testing.T) {
	for _, budget := range []int64{256 << 20, 1 << 30, 8 << 30} {
		per := StoreMemoryOf(budget/2, 14, 8)
		o := Config{StoreMemory: per}.levelDB()
		// Two write buffers (filling and flushing) and the block cache.
		worst := int64(2*o.WriteBuffer + o.BlockCacheCapacity)
		if worst > max(per, 3<<20) {
			t.Errorf("budget %d: a store may take %d, its share is %d", budget, worst, per)
		}
		if o.WriteBuffer < 1<<20 || o.WriteBuffer > 32<<20 {
			t.Errorf("budget %d: write buffer %d outside [1, 32] MiB", budget, o.WriteBuffer)
		}
	}
	if got := (Config{}).levelDB().WriteBuffer; got != DefaultStoreMemory/4 {
		t.Errorf("no budget: write buffer %d, want %d", got, DefaultStoreMemory/4)
	}
}
