package numerator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
)

// TestPlanProperties drives the whole state through random generations of
// keys appearing, vanishing and returning, with seals, automatic and forced
// rebuilds and reshards, applying each plan as the numerator group does, and
// checks after every step: the same input plans the same; every live key is
// in its scheme's shard with a doc_id no other live key of the shard has;
// after a rebuild or reshard every shard is dense (its size is its live
// keys); across a seal without rebuild, keys that stayed live kept their ids,
// and new keys took the lowest free ids before the ones after the maximum.
func TestPlanProperties(t *testing.T) {
	for seed := uint64(1); seed <= 15; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			table := map[sharding.Key]Entry{}
			schemeID := int64(0)
			var g int64
			for step := 0; step < 25; step++ {
				g++
				for i := range 400 {
					k := sharding.Key{BusinessID: uint64(1 + i%13), OfferID: fmt.Sprintf("o%04d", i), ShopID: 1, WarehouseID: uint64(1 + i%2)}
					e, known := table[k]
					if r.IntN(100) >= 55 {
						continue
					}
					if !known {
						e = Entry{Key: k, Shard: -1, DocID: NoDocID}
					}
					e.LastSeen = g
					table[k] = e
				}
				m := schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: g, Scheme: -1}
				switch x := r.IntN(10); {
				case x == 0:
					m.Action = schemas.MarkerRebuild
				case x == 1:
					m.Action, m.Scheme = schemas.MarkerReshard, int64(r.IntN(3))
					schemeID = m.Scheme
				}
				scheme, _ := sharding.Get(schemeID)
				entries := slices.SortedFunc(maps.Values(table), ByKey)
				plan := Plan(entries, scheme, m, g, 2, 0.4)
				if again := Plan(entries, scheme, m, g, 2, 0.4); !reflect.DeepEqual(plan, again) {
					t.Fatal("the same input planned twice differently")
				}
				before := maps.Clone(table)
				for _, a := range plan.Assignments {
					e := table[a.Key]
					e.Shard, e.DocID = a.Shard, a.DocID
					table[a.Key] = e
				}
				checkPlan(t, step, scheme, plan, before, table, m)
			}
		})
	}
}

func checkPlan(t *testing.T, step int, scheme sharding.Scheme, plan StatePlan, before, after map[sharding.Key]Entry, m schemas.GenerationMarker) {
	t.Helper()
	ids := map[int]map[int64]sharding.Key{}
	for k, e := range after {
		if e.DocID == NoDocID {
			continue
		}
		if e.Shard != scheme.Shard(k) {
			t.Fatalf("step %d: %v in shard %d, the scheme says %d", step, k, e.Shard, scheme.Shard(k))
		}
		if ids[e.Shard] == nil {
			ids[e.Shard] = map[int64]sharding.Key{}
		}
		if other, dup := ids[e.Shard][e.DocID]; dup {
			t.Fatalf("step %d: %v and %v share doc_id %d in shard %d", step, k, other, e.DocID, e.Shard)
		}
		ids[e.Shard][e.DocID] = k
	}
	if m.Action == schemas.MarkerRebuild {
		// A forced rebuild keeps the keys of the latest input alone.
		for k, e := range after {
			if want := before[k].DocID != NoDocID && before[k].LastSeen >= m.Generation; (e.DocID != NoDocID) != want {
				t.Fatalf("step %d: a forced rebuild left %v with id %d (before: %+v)", step, k, e.DocID, before[k])
			}
		}
	}
	if plan.Rebuilt {
		for s, used := range ids {
			if int64(len(used)) != plan.Shards[s].MaxDocID+1 {
				t.Fatalf("step %d (%s): shard %d has %d keys and max id %d after a rebuild", step, m.Action, s, len(used), plan.Shards[s].MaxDocID)
			}
		}
		return
	}
	// A seal without rebuild: live keys keep their ids; new ids are the
	// lowest free ones first.
	for k, e := range after {
		old := before[k]
		if old.DocID != NoDocID && e.DocID != NoDocID && (old.DocID != e.DocID || old.Shard != e.Shard) {
			t.Fatalf("step %d: %v moved from %d/%d to %d/%d", step, k, old.Shard, old.DocID, e.Shard, e.DocID)
		}
	}
	for s := range scheme.Shards {
		var newIDs []int64
		maxBefore := int64(-1)
		for k, e := range after {
			if e.Shard != s {
				continue
			}
			if o := before[k]; o.DocID != NoDocID {
				maxBefore = max(maxBefore, o.DocID)
			} else if e.DocID != NoDocID {
				newIDs = append(newIDs, e.DocID)
			}
		}
		slices.Sort(newIDs)
		for i := 1; i < len(newIDs); i++ {
			if newIDs[i] > maxBefore && newIDs[i-1] > maxBefore && newIDs[i] != newIDs[i-1]+1 {
				t.Fatalf("step %d: shard %d: new ids after the maximum are not consecutive: %v", step, s, newIDs)
			}
		}
	}
}
