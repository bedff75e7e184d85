package numerator

import (
	"slices"

	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
)

// Planned is a key's assignment after a plan.
type Planned struct {
	Key   sharding.Key
	Shard int
	DocID int64 // NoDocID: the key's id expired
}

// StatePlan is what a marker does to the whole state.
type StatePlan struct {
	// Assignments that change, in key order.
	Assignments []Planned
	// Shards summarises every shard after the plan.
	Shards []schemas.ShardSummary
	// Rebuilt is true when the ids were renumbered (V+1).
	Rebuilt bool
}

// ShardStateOf derives a shard's allocator state from its entries: the
// largest id held and the ids below it that nobody holds. (Ids freed above
// the largest held are given again as "after the maximum", in the same
// ascending order a free list would give them.)
func ShardStateOf(es []Entry) ShardState {
	used := map[int64]bool{}
	st := EmptyShard()
	for _, e := range es {
		if e.DocID != NoDocID {
			used[e.DocID] = true
			st.MaxDocID = max(st.MaxDocID, e.DocID)
		}
	}
	for id := int64(0); id < st.MaxDocID; id++ {
		if !used[id] {
			st.Free = append(st.Free, id)
		}
	}
	return st
}

// Plan decides a marker over every entry of the state (sorted by key):
// a SEAL of generation g expires and assigns per shard (SealShard), then
// rebuilds every shard if one has more holes than rebuildShare; a REBUILD
// renumbers every shard; a RESHARD moves every key to scheme's shards and
// renumbers them. It is a pure function of its arguments.
func Plan(entries []Entry, scheme sharding.Scheme, m schemas.GenerationMarker, g, ttl int64, rebuildShare float64) StatePlan {
	var plan StatePlan
	after := make([][]Entry, scheme.Shards)
	stats := make([]SealStats, scheme.Shards)
	states := make([]ShardState, scheme.Shards)
	if m.Action == schemas.MarkerReshard {
		st, byShard := Reshard(scheme, entries)
		for s := range scheme.Shards {
			after[s], states[s] = byShard[s], st[s]
		}
		plan.Rebuilt = true
	} else {
		byShard := make([][]Entry, scheme.Shards)
		for _, e := range entries {
			s := scheme.Shard(e.Key)
			byShard[s] = append(byShard[s], e)
		}
		rebuild := m.Action == schemas.MarkerRebuild
		for s := range scheme.Shards {
			es := byShard[s]
			if m.Action == schemas.MarkerSeal {
				states[s], after[s], _, stats[s] = SealShard(ShardStateOf(es), es, g, ttl)
				rebuild = rebuild || NeedsRebuild(states[s], rebuildShare)
			} else {
				states[s], after[s] = ShardStateOf(es), es
			}
			for i := range after[s] {
				if after[s][i].DocID != NoDocID {
					after[s][i].Shard = s
				}
			}
		}
		if rebuild {
			for s := range scheme.Shards {
				states[s], after[s], _ = RebuildShard(after[s])
			}
			plan.Rebuilt = true
		}
	}
	before := make(map[sharding.Key]Entry, len(entries))
	for _, e := range entries {
		before[e.Key] = e
	}
	for s := range scheme.Shards {
		var live int64
		for _, e := range after[s] {
			if e.DocID != NoDocID {
				live++
			}
			old := before[e.Key]
			switch {
			case e.DocID == NoDocID && old.DocID == NoDocID:
			case e.DocID == NoDocID:
				plan.Assignments = append(plan.Assignments, Planned{Key: e.Key, Shard: old.Shard, DocID: NoDocID})
			case e.DocID != old.DocID || e.Shard != old.Shard:
				plan.Assignments = append(plan.Assignments, Planned{Key: e.Key, Shard: e.Shard, DocID: e.DocID})
			}
		}
		plan.Shards = append(plan.Shards, schemas.ShardSummary{Shard: int32(s), Live: live, MaxDocID: states[s].MaxDocID,
			Free: states[s].Holes(), Expired: stats[s].Expired, New: stats[s].New})
	}
	slices.SortFunc(plan.Assignments, func(a, b Planned) int { return ByKey(Entry{Key: a.Key}, Entry{Key: b.Key}) })
	return plan
}
