package offerapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/cabinet/cabinettest"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// TestOffersDoneWithAreArchived runs the offer storage with the scheduler
// (whose timer service fires the archive timers) and an archive time of
// two seconds: a sold, an expired and a deleted offer leave offers-table
// for offers.archive; the sold and the expired one are still read by id
// and listed in their presets, marked archived, the deleted one is still
// not found; the seller's counters do not move and still agree with a
// recount over the table and the archive; an archived offer is not
// updated, and a feed item of its external id makes a new offer. A replay
// of the aggregate gives the same table and the same archive.
func TestOffersDoneWithAreArchived(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	const after = 2 * time.Second
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers, cfg.ArchiveAfter = brokers, after
	cfg.Components = append(slices.Clone(gostComponents), platform.ComponentScheduler)
	r := platformtest.Start(t, cfg)
	n := &node{info: r.Info, stop: func() { _ = r.Stop() }}
	ctx := testkit.Context(t, 3*time.Minute)

	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/1", feed(1, 5, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/1/finish", "", nil)
	gina := n.byExternal(t, "gina", "all", 5)
	id := func(ext int) string { return gina[fmt.Sprint("vin-", ext)].Offer.ID }
	for ext, status := range map[int]string{1: "SOLD", 2: "EXPIRED"} {
		body := fmt.Sprintf(`{"seller_id":"gina","expected_version":-1,"offer":{"category":"cars","title":"x","price":%d,"currency":"RUB","status":%q}}`, 1000+ext, status)
		n.want(t, 200, "PUT", "/v1/offers/"+id(ext), body, nil)
	}
	n.want(t, 200, "DELETE", "/v1/offers/"+id(3)+"?seller_id=gina", "", nil)
	counted := [5]int64{2, 1, 0, 1, 1001} // active, expired, banned, sold, money earned
	n.eventuallyCounters(t, "gina", 4, counted)

	gone := map[string]bool{id(1): true, id(2): true, id(3): true}
	testkit.Eventually(t, time.Minute, "the sold, expired and deleted offers leave offers-table for offers.archive", func() bool {
		active, archive := testkit.Table(t, brokers, topics.OffersTable), testkit.Table(t, brokers, topics.OffersArchive)
		for k := range gone {
			if active[k] != nil || archive[k] == nil {
				return false
			}
		}
		return len(active) == 2 && len(archive) == 3
	})
	for _, ext := range []int{1, 2} {
		var got offerapi.OfferVersion
		n.want(t, 200, "GET", "/v1/offers/"+id(ext), "", &got)
		if !got.Archived || got.Offer.ID != id(ext) || got.Offer.Title != "x" {
			t.Errorf("GET of archived vin-%d: %+v", ext, got)
		}
	}
	n.want(t, http.StatusNotFound, "GET", "/v1/offers/"+id(3), "", nil)
	var live offerapi.OfferVersion
	if n.want(t, 200, "GET", "/v1/offers/"+id(4), "", &live); live.Archived {
		t.Errorf("an active offer read as archived: %+v", live)
	}
	if sold := n.listAll(t, "gina", "sold", 10); len(sold) != 1 || sold[0].Offer.ID != id(1) || !sold[0].Archived {
		t.Errorf("the sold preset lists %+v", sold)
	}
	n.eventuallyCounters(t, "gina", 4, counted)
	merged := testkit.Table(t, brokers, topics.OffersTable)
	for k, v := range testkit.Table(t, brokers, topics.OffersArchive) {
		merged[k] = v
	}
	cabinettest.Recount(t, merged, testkit.Table(t, brokers, topics.CabinetTable))

	n.want(t, http.StatusNotFound, "PUT", "/v1/offers/"+id(1), `{"seller_id":"gina","expected_version":-1,"offer":{"category":"cars","title":"y","price":5,"currency":"RUB"}}`, nil)
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/2", feed(1, 1, "t2"), nil)
	testkit.Eventually(t, 30*time.Second, "a feed item of the archived offer's external id makes a new offer", func() bool {
		for _, o := range n.listAll(t, "gina", "active", 10) {
			if o.Offer.ExternalID == "vin-1" && o.Offer.ID != id(1) {
				return true
			}
		}
		return false
	})
	n.eventuallyCounters(t, "gina", 5, [5]int64{3, 1, 0, 1, 1001})
	n.stop()

	before := map[string]map[string][]byte{}
	for _, tb := range []string{string(topics.OffersTable), string(topics.OffersArchive)} {
		before[tb] = testkit.Table(t, brokers, tb)
	}
	scfg := table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	if err := offers.Replay(ctx, offers.Config{Streams: scfg, Stages: cfg.Stages.Names(), ArchiveAfter: after}, cfg.Partitions, -1); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []string{string(topics.OffersTable), string(topics.OffersArchive)} {
		replayed := testkit.Table(t, brokers, tb)
		if len(replayed) != len(before[tb]) {
			t.Errorf("replay: %s has %d keys, had %d", tb, len(replayed), len(before[tb]))
		}
		for k, v := range before[tb] {
			if !bytes.Equal(v, replayed[k]) {
				_, x, _ := schemas.DecodeJSON(v)
				_, y, _ := schemas.DecodeJSON(replayed[k])
				t.Errorf("replay: %s[%s] differs:\n%v\n%v", tb, k, x, y)
			}
		}
	}
}

// TestOffersDoneWithBeforeArchivingAreArmed: offers sold and deleted on a
// platform that did not archive (--archive-after 0, as before 0.5.0) have
// no archive time; once it archives, offerlog archive arm gives them one,
// and they move to offers.archive; a second arm finds none left.
func TestOffersDoneWithBeforeArchivingAreArmed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers, cfg.ArchiveAfter = brokers, 0
	cfg.Components = append(slices.Clone(gostComponents), platform.ComponentScheduler)
	r := platformtest.Start(t, cfg)
	n := &node{info: r.Info, stop: func() { _ = r.Stop() }}
	ctx := testkit.Context(t, 2*time.Minute)
	n.want(t, 202, "POST", "/v1/sellers/kim/feeds/1", feed(1, 4, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/kim/feeds/1/finish", "", nil)
	kim := n.byExternal(t, "kim", "all", 4)
	n.want(t, 200, "PUT", "/v1/offers/"+kim["vin-1"].Offer.ID,
		`{"seller_id":"kim","expected_version":-1,"offer":{"category":"cars","title":"x","price":5,"currency":"RUB","status":"SOLD"}}`, nil)
	n.want(t, 200, "DELETE", "/v1/offers/"+kim["vin-2"].Offer.ID+"?seller_id=kim", "", nil)
	n.eventuallyCounters(t, "kim", 3, [5]int64{2, 0, 0, 1, 5})
	n.stop()

	cfg.ArchiveAfter = time.Second
	r = platformtest.Start(t, cfg)
	n = &node{info: r.Info, stop: func() { _ = r.Stop() }}
	defer n.stop()
	kafka := testkit.Cluster(t, brokers)
	armed, err := offers.ArmArchives(ctx, kafka)
	if err != nil || armed != 2 {
		t.Fatalf("armed %d offers (%v), want the sold and the deleted one", armed, err)
	}
	testkit.Eventually(t, time.Minute, "the two move to offers.archive", func() bool {
		archive := testkit.Table(t, brokers, topics.OffersArchive)
		return archive[kim["vin-1"].Offer.ID] != nil && archive[kim["vin-2"].Offer.ID] != nil &&
			testkit.Table(t, brokers, topics.OffersTable)[kim["vin-1"].Offer.ID] == nil
	})
	var got offerapi.OfferVersion
	if n.want(t, 200, "GET", "/v1/offers/"+kim["vin-1"].Offer.ID, "", &got); !got.Archived {
		t.Errorf("the sold offer after its arming: %+v", got)
	}
	if again, err := offers.ArmArchives(ctx, kafka); err != nil || again != 0 {
		t.Errorf("a second arming sent %d (%v), want none", again, err)
	}
	n.eventuallyCounters(t, "kim", 3, [5]int64{2, 0, 0, 1, 5})
}
