package offers_test

import (
	"context"
	"sync"
	"testing"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// TestIDsAreUniqueByConstruction: processes opening offers.ids at once
// agree on one key, and the ids they hand out, across blocks, are valid
// and never the same; no id is drawn twice, so none is retried.
func TestIDsAreUniqueByConstruction(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	ctx := context.Background()

	const processes, each = 3, 2*offers.IDBlock + 10
	all := make([][]string, processes)
	var wg sync.WaitGroup
	errs := make([]error, processes)
	for i := range processes {
		wg.Go(func() {
			ids, err := offers.OpenIDs(ctx, testkit.Cluster(t, brokers), "test")
			if err != nil {
				errs[i] = err
				return
			}
			defer ids.Close()
			for range each {
				id, err := ids.New(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				all[i] = append(all[i], id)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, ids := range all {
		for _, id := range ids {
			if !offers.ValidID(id) || seen[id] {
				t.Fatalf("id %q invalid or handed out twice", id)
			}
			seen[id] = true
		}
	}
	keys, blocks := 0, 0
	for _, r := range testkit.ReadAll(t, brokers, topics.OffersIDs) {
		var c schemas.IDClaim
		if err := schemas.IDClaims.Decode(r.Value, &c); err != nil {
			t.Fatal(err)
		}
		switch c.Kind {
		case schemas.IDClaimKey:
			keys++
			if r.Partition != 0 {
				t.Errorf("a key claimed on partition %d", r.Partition)
			}
		case schemas.IDClaimBlock:
			blocks++
		}
	}
	if keys < 1 || keys > processes || blocks != processes*3 {
		t.Errorf("%d key claims and %d block claims, want 1 to %d keys (the first one counts) and %d blocks", keys, blocks, processes, processes*3)
	}
}

// TestUnusedIdsAreHandedOutAgain: an id given back is the next one handed
// out, so a request that needed none costs none.
func TestUnusedIdsAreHandedOutAgain(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	ctx := context.Background()
	ids, err := offers.OpenIDs(ctx, testkit.Cluster(t, brokers), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Close()
	a, err := ids.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids.Unused(a)
	if b, err := ids.New(ctx); err != nil || b != a {
		t.Errorf("after giving %s back, New gave %s (%v)", a, b, err)
	}
	if c, err := ids.New(ctx); err != nil || c == a {
		t.Errorf("New gave %s again (%v)", c, err)
	}
}
