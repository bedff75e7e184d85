package numerator

import (
	"fmt"
	"testing"
)

// TestShardLoaderReadsAsManyShardsAsFit checks the seal's reads of the
// table: every shard's entries come back whole and once per request, and a
// pass holds as many shards after the one asked for as fit in the budget.
func TestShardLoaderReadsAsManyShardsAsFit(t *testing.T) {
	const shards = 16
	// Shard s holds 10*(s+1) entries, spread over the table's key order.
	var table []int
	for s := range shards {
		for range 10 * (s + 1) {
			table = append(table, s)
		}
	}
	for i := len(table) - 1; i > 0; i-- { // a fixed shuffle
		j := (i * 7919) % (i + 1)
		table[i], table[j] = table[j], table[i]
	}
	for _, tc := range []struct {
		budget, passes int
	}{
		{budget: len(table), passes: 1},
		{budget: 1, passes: shards}, // one shard a pass
		{budget: 100, passes: 13},   // shards 0-3 in one pass (100 entries), then one a pass
		{budget: len(table) / 2, passes: 3},
	} {
		t.Run(fmt.Sprint("budget ", tc.budget), func(t *testing.T) {
			passes, peak := 0, 0
			l := &shardLoader{budget: tc.budget, read: func(lo, hi int, keep func(int) (bool, int)) (map[int][]Entry, error) {
				passes++
				out := map[int][]Entry{}
				held := 0
				for i, s := range table {
					if s < lo || s >= hi {
						continue
					}
					ok, drop := keep(s)
					if drop >= 0 {
						held -= len(out[drop])
						delete(out, drop)
					}
					if !ok {
						continue
					}
					out[s] = append(out[s], Entry{DocID: int64(i)})
					held++
					peak = max(peak, held)
				}
				return out, nil
			}}
			for s := range shards {
				es, err := l.shard(s, shards)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) != 10*(s+1) {
					t.Fatalf("shard %d: %d entries, want %d", s, len(es), 10*(s+1))
				}
			}
			if passes != tc.passes {
				t.Errorf("%d passes, want %d", passes, tc.passes)
			}
			if passes > shards {
				t.Errorf("%d passes for %d shards", passes, shards)
			}
			// A pass holds at most the budget and one shard more (the shard
			// asked for is always read whole).
			if limit := max(tc.budget, 10*shards) + 10*shards; peak > limit {
				t.Errorf("a pass held %d entries, budget %d", peak, tc.budget)
			}
			t.Logf("budget %d: %d passes", tc.budget, passes)
		})
	}
}
