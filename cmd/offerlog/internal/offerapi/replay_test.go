package offerapi_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/cabinet/cabinettest"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// settle waits until every group of the offer storage has committed all of
// its input, in the order they feed each other.
func settle(t *testing.T, brokers []string) {
	t.Helper()
	ctx := testkit.Context(t, time.Minute)
	adm := testkit.Admin(t, brokers)
	for _, g := range []struct {
		group  string
		inputs []string
	}{
		{feeds.Group, []string{topics.FeedsIngest}},
		{offers.InboxGroup, []string{topics.PhotosResults, topics.ModerationOpinions}},
		{string(offers.Group), []string{topics.OffersCommands}},
		{string(drafts.Group), []string{topics.DraftsCommands}},
		{string(cabinet.Group), []string{topics.CabinetChanges}},
	} {
		ends, err := adm.ListEndOffsets(ctx, g.inputs...)
		if err != nil {
			t.Fatal(err)
		}
		if err := streams.WaitCommitted(ctx, adm, g.group, ends.Offsets()); err != nil {
			t.Fatalf("%s did not commit its input: %v", g.group, err)
		}
	}
}

var tables = []string{string(topics.OffersTable), string(topics.CabinetTable), string(topics.DraftsTable), string(topics.CabinetPresets), string(topics.FeedsIndex)}

func snapshot(t *testing.T, brokers []string) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, tb := range tables {
		out[tb] = testkit.Table(t, brokers, tb)
	}
	return out
}

func sameTables(t *testing.T, what string, a, b map[string]map[string][]byte) {
	t.Helper()
	for _, tb := range tables {
		if len(a[tb]) != len(b[tb]) {
			t.Errorf("%s: %s has %d keys, was %d", what, tb, len(b[tb]), len(a[tb]))
		}
		for k, v := range a[tb] {
			if !bytes.Equal(v, b[tb][k]) {
				_, x, _ := schemas.DecodeJSON(v)
				_, y, _ := schemas.DecodeJSON(b[tb][k])
				t.Errorf("%s: %s[%s] differs:\n%v\n%v", what, tb, k, x, y)
			}
		}
	}
}

// recount checks the cabinet table against a count from scratch over the
// offer table.
func recount(t *testing.T, snap map[string]map[string][]byte) {
	t.Helper()
	cabinettest.Recount(t, snap[string(topics.OffersTable)], snap[string(topics.CabinetTable)])
}

func TestRestartAndReplayGiveTheSameState(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	dir := t.TempDir()
	n := start(t, brokers, dir)
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, 4*time.Minute)

	// A mix of everything: feeds with deletes, bans, sales, drafts, photos.
	for _, seller := range []string{"erin", "frank"} {
		n.want(t, 202, "POST", "/v1/sellers/"+seller+"/feeds/1", feed(1, 12, "t1"), nil)
		n.want(t, 202, "POST", "/v1/sellers/"+seller+"/feeds/1/finish", "", nil)
	}
	erin := n.byExternal(t, "erin", "all", 12)
	n.want(t, 202, "POST", "/v1/sellers/erin/feeds/2", feed(1, 8, "t2"), nil)
	n.want(t, 202, "POST", "/v1/sellers/erin/feeds/2/finish", "", nil)
	// Task 2 done (vin-9..12 deleted) before the writes below: a feed item
	// applied after them would make an offer ACTIVE again.
	n.eventuallyCounters(t, "erin", 8, [5]int64{8, 0, 0, 0, 0})
	for i, status := range []string{"SOLD", "INACTIVE", "EXPIRED", "SOLD"} {
		o := erin[fmt.Sprint("vin-", i+1)].Offer
		body := fmt.Sprintf(`{"seller_id":"erin","expected_version":-1,"offer":{"category":"cars","title":"x","price":%d,"currency":"RUB","status":%q}}`, 100*(i+1), status)
		n.want(t, 200, "PUT", "/v1/offers/"+o.ID, body, nil)
	}
	ban := erin["vin-5"].Offer.ID
	op, _ := schemas.ModerationOpinions.Encode(&schemas.ModerationOpinion{OfferID: ban, Banned: true, Reasons: []string{"spam"}})
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topics.ModerationOpinions, Key: []byte(ban), Value: op}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var d schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"v9","category":"cars"}`, &d)
	n.want(t, 200, "PUT", "/v1/drafts/"+d.ID, `{"anon":"v9","offer":`+offerBody+`}`, &d)
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"v9","user":"erin"}`, &d)
	var pub offerapi.OfferVersion
	n.want(t, 201, "POST", "/v1/drafts/"+d.ID+"/publish", fmt.Sprintf(`{"user":"erin","version":%d}`, d.Version), &pub)
	pr, _ := schemas.PhotoResults.Encode(&schemas.PhotoResult{OfferID: pub.Offer.ID, SourceURL: "https://img.example/1.jpg", Error: "too small"})
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topics.PhotosResults, Key: []byte(pub.Offer.ID), Value: pr}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n.want(t, 200, "POST", "/v1/drafts/current", `{"user":"erin","category":"flats"}`, nil)
	// erin: vin-1..8 of task 2 (1 and 4 sold, 2 inactive, 3 expired, 5
	// banned, 6..8 active) and the published offer: active 4.
	n.eventuallyCounters(t, "erin", 9, [5]int64{4, 1, 1, 2, 500})
	settle(t, brokers)
	before := snapshot(t, brokers)
	recount(t, before)

	// A restart resumes from the tables.
	n.stop()
	n = start(t, brokers, dir)
	n.eventuallyCounters(t, "erin", 9, [5]int64{4, 1, 1, 2, 500})
	var got offerapi.OfferVersion
	n.want(t, 200, "GET", "/v1/offers/"+pub.Offer.ID, "", &got)
	if got.Offer.Photos[0].Status != schemas.PhotoFailed || got.Version != pub.Version+1 {
		t.Errorf("after restart: %+v", got)
	}
	settle(t, brokers)
	sameTables(t, "restart", before, snapshot(t, brokers))
	n.stop()

	// Replays of the three groups, the aggregate first, give the same
	// tables byte for byte, and the counters still agree with a recount.
	scfg := table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: dir + "/replay-state", Replication: 1, Logger: testkit.Logger()}
	if err := offers.Replay(ctx, offers.Config{Streams: scfg}, 4, -1); err != nil {
		t.Fatal(err)
	}
	if err := drafts.Replay(ctx, drafts.Config{Streams: scfg}, 4, -1); err != nil {
		t.Fatal(err)
	}
	if err := cabinet.Replay(ctx, cabinet.Config{Streams: scfg}, 4, -1); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, brokers)
	sameTables(t, "replay", before, after)
	recount(t, after)
}
