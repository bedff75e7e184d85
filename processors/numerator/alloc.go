package numerator

import (
	"cmp"
	"slices"

	"github.com/offerlog/offerlog/processors/numerator/sharding"
)

// NoDocID marks an entry that holds no doc_id: a key seen for the first
// time, waiting for the seal of its generation, or one whose id expired.
const NoDocID int64 = -1

// Entry is the numerator's record of one offer key in a shard.
type Entry struct {
	Key      sharding.Key
	Shard    int   // the shard of its id, -1 if it never had one
	DocID    int64 // NoDocID if none
	LastSeen int64 // the last generation the key was seen in
}

// ShardState is what a shard's allocator keeps between generations.
type ShardState struct {
	// MaxDocID is the largest doc_id ever given in the shard since its last
	// rebuild, -1 if none.
	MaxDocID int64
	// Free are the doc_ids of expired keys, ascending, to be given again.
	Free []int64
}

// EmptyShard is the state of a shard that never gave an id.
func EmptyShard() ShardState { return ShardState{MaxDocID: -1} }

// Holes returns how many ids of [0, MaxDocID] are free.
func (s ShardState) Holes() int64 { return int64(len(s.Free)) }

// Size returns how many ids the shard spans: MaxDocID+1.
func (s ShardState) Size() int64 { return s.MaxDocID + 1 }

// Assignment is a doc_id given to (or taken from) a key by a decision.
type Assignment struct {
	Key   sharding.Key
	DocID int64 // NoDocID when the key's id expired
	// Previous is the id the key had before, NoDocID if none.
	Previous int64
}

// SealStats counts what a seal did in a shard.
type SealStats struct {
	// Seen counts the keys seen in the sealed generation.
	Seen, New, Expired, Reused, Live int64
}

// SealShard decides generation g for one shard. entries are every key of
// the shard, sorted by key (ByKey), with their ids and the generation they
// were last seen in. Keys not seen for ttl generations (LastSeen <= g-ttl)
// lose their id, which becomes free; then keys without an id that were seen
// in g get, in key order, the free ids ascending and then the ids after the
// shard's maximum. It returns the new state, the entries as they are after
// the seal (same order; expired keys stay, without an id), the assignments
// that changed and counts. It is a pure function: the same input gives the
// same ids whatever processed it, however often.
func SealShard(st ShardState, entries []Entry, g, ttl int64) (ShardState, []Entry, []Assignment, SealStats) {
	next := ShardState{MaxDocID: st.MaxDocID, Free: slices.Clone(st.Free)}
	out := slices.Clone(entries)
	var changes []Assignment
	var stats SealStats
	for i, e := range out {
		if e.LastSeen == g {
			stats.Seen++
		}
		if e.DocID != NoDocID && ttl > 0 && e.LastSeen <= g-ttl {
			next.Free = append(next.Free, e.DocID)
			changes = append(changes, Assignment{Key: e.Key, DocID: NoDocID, Previous: e.DocID})
			out[i].DocID = NoDocID
			stats.Expired++
		}
	}
	slices.Sort(next.Free)
	for i, e := range out {
		if e.DocID != NoDocID || e.LastSeen != g {
			continue
		}
		if len(next.Free) > 0 {
			out[i].DocID, next.Free = next.Free[0], next.Free[1:]
			stats.Reused++
		} else {
			next.MaxDocID++
			out[i].DocID = next.MaxDocID
		}
		changes = append(changes, Assignment{Key: e.Key, DocID: out[i].DocID, Previous: NoDocID})
		stats.New++
	}
	for _, e := range out {
		if e.DocID != NoDocID {
			stats.Live++
		}
	}
	return next, out, changes, stats
}

// NeedsRebuild reports whether a shard's holes exceed share of its size
// (share in (0, 1]; 0 never rebuilds automatically).
func NeedsRebuild(st ShardState, share float64) bool {
	return share > 0 && st.Size() > 0 && float64(st.Holes()) > share*float64(st.Size())
}

// RebuildShard renumbers a shard densely: the keys holding an id, in key
// order, get 0, 1, 2, ...; keys without an id stay without. After it the
// shard's size equals its number of live keys and nothing is free. It
// returns the new state, the entries after it and the assignments that
// changed.
func RebuildShard(entries []Entry) (ShardState, []Entry, []Assignment) {
	st := EmptyShard()
	out := slices.Clone(entries)
	var changes []Assignment
	for i, e := range out {
		if e.DocID == NoDocID {
			continue
		}
		st.MaxDocID++
		if e.DocID != st.MaxDocID {
			changes = append(changes, Assignment{Key: e.Key, DocID: st.MaxDocID, Previous: e.DocID})
			out[i].DocID = st.MaxDocID
		}
	}
	return st, out, changes
}

// Reshard moves every entry to its shard under scheme and renumbers each
// shard densely in key order, as RebuildShard does; entries without an id
// move without one. It returns the new shards' states and entries.
func Reshard(scheme sharding.Scheme, entries []Entry) (map[int]ShardState, map[int][]Entry) {
	byShard := map[int][]Entry{}
	for _, e := range entries {
		s := scheme.Shard(e.Key)
		byShard[s] = append(byShard[s], e)
	}
	states := make(map[int]ShardState, scheme.Shards)
	out := make(map[int][]Entry, scheme.Shards)
	for s := range scheme.Shards {
		es := byShard[s]
		slices.SortFunc(es, ByKey)
		st, renumbered, _ := RebuildShard(es)
		for i := range renumbered {
			if renumbered[i].DocID != NoDocID {
				renumbered[i].Shard = s
			}
		}
		states[s], out[s] = st, renumbered
	}
	return states, out
}

// ByKey orders entries by key: business, offer, shop, warehouse. Sealing
// and rebuilding go in this order, which makes their ids deterministic.
func ByKey(a, b Entry) int {
	return cmp.Or(
		cmp.Compare(a.Key.BusinessID, b.Key.BusinessID),
		cmp.Compare(a.Key.OfferID, b.Key.OfferID),
		cmp.Compare(a.Key.ShopID, b.Key.ShopID),
		cmp.Compare(a.Key.WarehouseID, b.Key.WarehouseID),
	)
}
