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
	// Seen counts the keys seen in a sealed generation; New the keys that
	// got a doc_id.
	Seen, New int64
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

// PlanShard decides a marker for one shard s of scheme: es are the keys
// the scheme puts in s, sorted by key, as the table holds them. A SEAL of
// generation g expires and assigns (SealShard); a REBUILD (forced) first
// takes their ids from the keys not seen in g, the last sealed generation;
// with rebuild (a REBUILD or RESHARD marker, or a seal that must rebuild)
// the shard is then renumbered densely. It returns the assignments that change, in key order, the
// shard's summary, and whether the shard has more holes than rebuildShare.
// It is a pure function of its arguments.
func PlanShard(es []Entry, s int, m schemas.GenerationMarker, g, ttl int64, rebuild bool, rebuildShare float64) ([]Planned, schemas.ShardSummary, SealStats, bool) {
	var st ShardState
	var after []Entry
	var stats SealStats
	if m.Action == schemas.MarkerSeal {
		st, after, _, stats = SealShard(ShardStateOf(es), es, g, ttl)
	} else {
		st, after = ShardStateOf(es), slices.Clone(es)
		if m.Action == schemas.MarkerRebuild {
			// The seed's forced rebuild (its case 1): each shard the size
			// of the latest input, so a key not seen in the last sealed
			// generation g loses its id, however young it is by the TTL.
			for i := range after {
				if after[i].DocID != NoDocID && after[i].LastSeen < g {
					after[i].DocID = NoDocID
					stats.Expired++
				}
			}
		}
	}
	needs := NeedsRebuild(st, rebuildShare)
	if rebuild {
		st, after, _ = RebuildShard(after)
	}
	var out []Planned
	var live int64
	for i, e := range after {
		old := es[i]
		if e.DocID != NoDocID {
			live++
			e.Shard = s
		}
		switch {
		case e.DocID == NoDocID && old.DocID == NoDocID:
		case e.DocID == NoDocID:
			out = append(out, Planned{Key: e.Key, Shard: old.Shard, DocID: NoDocID})
		case e.DocID != old.DocID || e.Shard != old.Shard:
			out = append(out, Planned{Key: e.Key, Shard: e.Shard, DocID: e.DocID})
		}
	}
	return out, schemas.ShardSummary{Shard: int32(s), Live: live, MaxDocID: st.MaxDocID, Free: st.Holes(),
		Expired: stats.Expired, New: stats.New}, stats, needs
}

// Plan decides a marker over every entry of the state (sorted by key) with
// PlanShard, shard by shard: a seal that leaves any shard with more holes
// than rebuildShare is planned again with every shard rebuilt; a REBUILD or
// RESHARD (to scheme) renumbers every shard.
func Plan(entries []Entry, scheme sharding.Scheme, m schemas.GenerationMarker, g, ttl int64, rebuildShare float64) StatePlan {
	byShard := make([][]Entry, scheme.Shards)
	for _, e := range entries {
		s := scheme.Shard(e.Key)
		byShard[s] = append(byShard[s], e)
	}
	return PlanShards(scheme, m, g, ttl, rebuildShare, func(s int) []Entry { return byShard[s] })
}

// PlanShards is Plan with the entries of each shard read by shard(s), which
// may be called twice per shard; only one shard's entries are needed at a
// time.
func PlanShards(scheme sharding.Scheme, m schemas.GenerationMarker, g, ttl int64, rebuildShare float64, shard func(s int) []Entry) StatePlan {
	rebuild := m.Action != schemas.MarkerSeal
	for {
		plan := StatePlan{Rebuilt: rebuild}
		needs := false
		for s := range scheme.Shards {
			a, sum, stats, n := PlanShard(shard(s), s, m, g, ttl, rebuild, rebuildShare)
			plan.Seen += stats.Seen
			plan.New += stats.New
			plan.Assignments = append(plan.Assignments, a...)
			plan.Shards = append(plan.Shards, sum)
			needs = needs || n
		}
		if needs && !rebuild {
			rebuild = true
			continue
		}
		slices.SortFunc(plan.Assignments, func(a, b Planned) int { return ByKey(Entry{Key: a.Key}, Entry{Key: b.Key}) })
		return plan
	}
}
