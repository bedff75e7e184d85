package offerapi_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestGarbageInTablesIsDeadLettered puts garbage under real keys of the
// offers, cabinet and drafts tables and restarts the offer storage on an
// empty local state, so that every group loads it: each garbage value is
// dead-lettered with the reason when its key is next touched, taken as
// absent, and every request is still answered.
func TestGarbageInTablesIsDeadLettered(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	n := start(t, brokers, t.TempDir())
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/1", feed(1, 3, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/1/finish", "", nil)
	loaded := n.byExternal(t, "gina", "all", 3)
	var d schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"g1","category":"cars"}`, &d)
	settle(t, brokers)
	n.stop()

	garbage := []byte("\x00garbage, not Avro")
	victim := loaded["vin-1"].Offer.ID
	testkit.Put(t, brokers, topics.OffersTable, []byte(victim), garbage)
	// The cabinet's part that vin-2's next change goes to (offers.CabinetKey).
	testkit.Put(t, brokers, topics.CabinetTable, []byte(offers.CabinetKey("gina", loaded["vin-2"].Offer.ID)), garbage)
	testkit.Put(t, brokers, topics.DraftsTable, []byte(d.Owner), garbage) // drafts are keyed by owner

	n = start(t, brokers, t.TempDir())
	// The offer's next command, the seller's next change and the draft's
	// next command each meet the garbage.
	body := `{"seller_id":"gina","expected_version":-1,"offer":{"category":"cars","title":"x","price":5,"currency":"RUB"}}`
	status := n.do(t, "PUT", "/v1/offers/"+victim, body, nil)
	if status != 404 {
		t.Errorf("PUT of the offer whose value is garbage: %d, want 404 (absent)", status)
	}
	n.want(t, 200, "PUT", "/v1/offers/"+loaded["vin-2"].Offer.ID, body, nil)
	if status := n.do(t, "PUT", "/v1/drafts/"+d.ID, `{"anon":"g1","offer":`+offerBody+`}`, nil); status >= 500 {
		t.Errorf("PUT of the draft whose value is garbage: %d", status)
	}
	from := map[string]bool{}
	testkit.Eventually(t, time.Minute, "dead letters of the three table values", func() bool {
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersDead) {
			var dl schemas.DeadLetter
			if err := schemas.DeadLetters.Decode(r.Value, &dl); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(dl.Reason, "undecodable table value") && string(dl.Value) == string(garbage) {
				from[dl.Topic] = true
			}
		}
		return from[string(topics.OffersTable)] && from[string(topics.CabinetTable)] && from[string(topics.DraftsTable)]
	})
	// Valid traffic goes on: a new feed is loaded and counted.
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/2", feed(4, 5, "t2"), nil)
	n.byExternal(t, "gina", "all", 2+2)
}

// TestBadCommandsAreDeadLettered: a null value, bytes that are no command,
// and a command on another partition than its key's (where the offer's, or
// the owner's draft's, state is not) are each dead-lettered with the
// reason, and the aggregate goes on answering.
func TestBadCommandsAreDeadLettered(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	n := start(t, brokers, t.TempDir())
	id := offers.IDFrom(rand.Uint64())
	c := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", ExpectedVersion: -1, DraftID: id,
		Offer: &schemas.Offer{Category: "cars", Title: "misplaced"}}
	cmd, err := schemas.OfferCommands.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := streams.PartitionsOf(testkit.Context(t, time.Minute), testkit.Admin(t, brokers), topics.OffersCommands)
	if err != nil {
		t.Fatal(err)
	}
	cl := testkit.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	wrong := (streams.Partition(id, parts) + 1) % parts
	owner := "user:misplaced"
	draft, err := schemas.DraftCommands.Encode(&schemas.DraftCommand{Kind: schemas.DraftCurrent, User: "misplaced"})
	if err != nil {
		t.Fatal(err)
	}
	feeder := "misfeed"
	item, err := schemas.FeedItems.Encode(&schemas.FeedItem{SellerID: feeder, TaskID: 1, ExternalID: "e1",
		Offer: &schemas.Offer{Category: "cars", Title: "misplaced item"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*kgo.Record{
		{Topic: topics.FeedsIngest, Key: []byte(feeder), Value: item, Partition: (streams.Partition(feeder, parts) + 1) % parts},
		{Topic: topics.DraftsCommands, Key: []byte(owner), Value: draft, Partition: (streams.Partition(owner, parts) + 1) % parts},
		{Topic: topics.OffersCommands, Key: []byte("11111111111"), Value: nil, Partition: streams.Partition("11111111111", parts)},
		{Topic: topics.OffersCommands, Key: []byte("22222222222"), Value: []byte("no command"), Partition: streams.Partition("22222222222", parts)},
		{Topic: topics.OffersCommands, Key: []byte(id), Value: cmd, Partition: wrong},
	} {
		if err := cl.ProduceSync(testkit.Context(t, time.Minute), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	reasons := map[string]string{}
	testkit.Eventually(t, time.Minute, "five dead letters", func() bool {
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersDead) {
			var dl schemas.DeadLetter
			if err := schemas.DeadLetters.Decode(r.Value, &dl); err != nil {
				t.Fatal(err)
			}
			reasons[string(dl.Key)] = dl.Reason
		}
		return len(reasons) == 5
	})
	for key, want := range map[string]string{"11111111111": "undecodable", "22222222222": "undecodable",
		owner:  fmt.Sprintf("belongs on partition %d", streams.Partition(owner, parts)),
		feeder: fmt.Sprintf("belongs on partition %d", streams.Partition(feeder, parts)),
		id:     fmt.Sprintf("belongs on partition %d", streams.Partition(id, parts))} {
		if !strings.Contains(reasons[key], want) {
			t.Errorf("%s: reason %q, want %q in it", key, reasons[key], want)
		}
	}
	n.want(t, 404, "GET", "/v1/offers/"+id, "", nil)
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/1", feed(1, 2, "t1"), nil)
	n.byExternal(t, "gina", "all", 2)
}
