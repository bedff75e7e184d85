package numerator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offerlog/offerlog/processors/numerator/sharding"
)

func key(i int) sharding.Key {
	return sharding.Key{BusinessID: 1, OfferID: fmt.Sprintf("offer-%05d", i), ShopID: 1, WarehouseID: 1}
}

// shard builds sorted entries: keys lo..hi-1, ids as given (NoDocID for
// none), all last seen in generation seen.
func entries(lo, hi int, seen int64, id func(i int) int64) []Entry {
	var out []Entry
	for i := lo; i < hi; i++ {
		out = append(out, Entry{Key: key(i), DocID: id(i), LastSeen: seen})
	}
	return out
}

func ids(es []Entry) map[string]int64 {
	out := map[string]int64{}
	for _, e := range es {
		out[e.Key.OfferID] = e.DocID
	}
	return out
}

// Seed case 5: the main case without a rebuild: new documents get new ids.
func TestSealGivesNewKeysTheIdsAfterTheMaximum(t *testing.T) {
	st := ShardState{MaxDocID: 9}
	es := append(entries(0, 10, 1, func(i int) int64 { return int64(i) }),
		entries(10, 13, 2, func(int) int64 { return NoDocID })...)
	// the old keys are seen again in generation 2
	for i := range 10 {
		es[i].LastSeen = 2
	}
	next, out, changes, stats := SealShard(st, es, 2, 5)
	got := ids(out)
	for i := 10; i < 13; i++ {
		if got[key(i).OfferID] != int64(i) {
			t.Fatalf("new key %d got %d, want %d", i, got[key(i).OfferID], i)
		}
	}
	if next.MaxDocID != 12 || len(changes) != 3 || stats.New != 3 || stats.Live != 13 || stats.Expired != 0 {
		t.Fatalf("state %+v changes %d stats %+v", next, len(changes), stats)
	}
}

// Seed case 2: the generation exceeds the TTL but nothing expired: new ids
// follow the maximum.
func TestSealPastTTLWithoutExpiredKeys(t *testing.T) {
	st := ShardState{MaxDocID: 4}
	es := append(entries(0, 5, 10, func(i int) int64 { return int64(i) }),
		entries(5, 7, 10, func(int) int64 { return NoDocID })...)
	next, out, _, stats := SealShard(st, es, 10, 3) // g=10 > ttl=3, every key seen in 10
	if stats.Expired != 0 || ids(out)[key(5).OfferID] != 5 || ids(out)[key(6).OfferID] != 6 || next.MaxDocID != 6 {
		t.Fatalf("stats %+v ids %v state %+v", stats, ids(out), next)
	}
}

// Seed case 3: expired keys exist: new keys take their ids first, then the
// ids after the maximum.
func TestSealReusesExpiredIds(t *testing.T) {
	st := ShardState{MaxDocID: 4}
	es := entries(0, 5, 10, func(i int) int64 { return int64(i) })
	es[1].LastSeen, es[3].LastSeen = 6, 7 // not seen for 4 and 3 generations
	es = append(es, entries(5, 8, 10, func(int) int64 { return NoDocID })...)
	next, out, changes, stats := SealShard(st, es, 10, 3)
	got := ids(out)
	if got[key(1).OfferID] != NoDocID || got[key(3).OfferID] != NoDocID {
		t.Fatalf("expired keys keep ids: %v", got)
	}
	want := map[int]int64{5: 1, 6: 3, 7: 5}
	for k, id := range want {
		if got[key(k).OfferID] != id {
			t.Fatalf("key %d got %d, want %d (%v)", k, got[key(k).OfferID], id, got)
		}
	}
	if stats.Expired != 2 || stats.Reused != 2 || stats.New != 3 || next.MaxDocID != 5 || len(next.Free) != 0 || len(changes) != 5 {
		t.Fatalf("stats %+v state %+v changes %d", stats, next, len(changes))
	}
}

// Seed cases 1 and 4: a rebuild, forced or automatic once holes exceed the
// configured share, leaves each shard the size of its live keys.
func TestRebuild(t *testing.T) {
	st := ShardState{MaxDocID: 9}
	es := entries(0, 10, 3, func(i int) int64 { return int64(i) })
	for i := range 6 {
		es[i].LastSeen = 1 // six keys go
	}
	st, es, _, stats := SealShard(st, es, 4, 2)
	if stats.Expired != 6 || st.Holes() != 6 {
		t.Fatalf("stats %+v state %+v", stats, st)
	}
	if NeedsRebuild(st, 0.7) || !NeedsRebuild(st, 0.5) || NeedsRebuild(st, 0) {
		t.Fatal("the automatic rebuild rule: 6 holes of 10")
	}
	rebuilt, out, changes := RebuildShard(es)
	if rebuilt.Size() != stats.Live || rebuilt.Holes() != 0 {
		t.Fatalf("rebuilt state %+v, %d live", rebuilt, stats.Live)
	}
	got := ids(out)
	for i, k := range []int{6, 7, 8, 9} {
		if got[key(k).OfferID] != int64(i) {
			t.Fatalf("key %d got %d, want %d", k, got[key(k).OfferID], i)
		}
	}
	if len(changes) != 4 {
		t.Fatalf("%d changes, want 4", len(changes))
	}
}

func TestReshardMovesKeysDensely(t *testing.T) {
	old, _ := sharding.Get(0)
	next, _ := sharding.Get(1)
	var all []Entry
	for i := range 1000 {
		all = append(all, Entry{Key: key(i), DocID: int64(i), LastSeen: 1})
	}
	all[3].DocID = NoDocID
	states, shards := Reshard(next, all)
	seen := 0
	for s, es := range shards {
		for i, e := range es {
			if next.Shard(e.Key) != s {
				t.Fatalf("key in shard %d, scheme says %d", s, next.Shard(e.Key))
			}
			if i > 0 && ByKey(es[i-1], e) >= 0 {
				t.Fatal("shard not in key order")
			}
		}
		live := int64(0)
		for _, e := range es {
			if e.DocID != NoDocID {
				live++
			}
		}
		if states[s].Size() != live {
			t.Fatalf("shard %d: size %d, %d live", s, states[s].Size(), live)
		}
		seen += len(es)
	}
	if seen != 1000 || old.Shards == next.Shards {
		t.Fatalf("%d keys after resharding", seen)
	}
}

// TestSealProperties runs random generations of keys appearing, vanishing
// and returning, with seals and rebuilds, and checks after every step: the
// live ids of the shard are unique; live and free ids together are exactly
// 0..max; keys that stayed live kept their ids (outside rebuilds); the same
// input gives the same output.
func TestSealProperties(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			const universe, ttl = 300, 3
			state := EmptyShard()
			book := map[int]Entry{} // key index -> entry
			for g := int64(1); g <= 30; g++ {
				for i := range universe {
					e, known := book[i]
					present := r.IntN(100) < 60
					if !known && !present {
						continue
					}
					if !known {
						e = Entry{Key: key(i), DocID: NoDocID}
					}
					if present {
						e.LastSeen = g
					}
					book[i] = e
				}
				var es []Entry
				for _, e := range book {
					es = append(es, e)
				}
				slices.SortFunc(es, ByKey)
				before := ids(es)
				next, out, _, _ := SealShard(state, es, g, ttl)
				again, out2, _, _ := SealShard(state, es, g, ttl)
				if !slices.Equal(next.Free, again.Free) || next.MaxDocID != again.MaxDocID || !slices.Equal(out, out2) {
					t.Fatal("the same seal gave two answers")
				}
				rebuilt := r.IntN(10) == 0
				if rebuilt {
					next, out, _ = RebuildShard(out)
				}
				checkShard(t, g, next, out)
				if !rebuilt {
					for _, e := range out {
						if old := before[e.Key.OfferID]; old != NoDocID && e.DocID != NoDocID && old != e.DocID {
							t.Fatalf("generation %d: %s moved from %d to %d", g, e.Key.OfferID, old, e.DocID)
						}
					}
				}
				state = next
				for _, e := range out {
					var i int
					fmt.Sscanf(e.Key.OfferID, "offer-%d", &i)
					book[i] = e
				}
			}
		})
	}
}

func checkShard(t *testing.T, g int64, st ShardState, es []Entry) {
	t.Helper()
	used := map[int64]string{}
	for _, e := range es {
		if e.DocID == NoDocID {
			continue
		}
		if other, dup := used[e.DocID]; dup {
			t.Fatalf("generation %d: %s and %s share doc_id %d", g, other, e.Key.OfferID, e.DocID)
		}
		used[e.DocID] = e.Key.OfferID
	}
	for _, id := range st.Free {
		if _, dup := used[id]; dup {
			t.Fatalf("generation %d: free id %d is in use", g, id)
		}
		used[id] = "free"
	}
	if int64(len(used)) != st.Size() {
		t.Fatalf("generation %d: %d ids live or free, shard spans %d", g, len(used), st.Size())
	}
	for id := range used {
		if id < 0 || id > st.MaxDocID {
			t.Fatalf("generation %d: id %d outside 0..%d", g, id, st.MaxDocID)
		}
	}
}
