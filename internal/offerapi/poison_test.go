package offerapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
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
	offers := n.byExternal(t, "gina", "all", 3)
	var d schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"g1","category":"cars"}`, &d)
	settle(t, brokers)
	n.stop()

	garbage := []byte("\x00garbage, not Avro")
	victim := offers["vin-1"].Offer.ID
	testkit.Put(t, brokers, topics.OffersTable, []byte(victim), garbage)
	testkit.Put(t, brokers, topics.CabinetTable, []byte("gina"), garbage)
	testkit.Put(t, brokers, topics.DraftsTable, []byte(d.Owner), garbage) // drafts are keyed by owner

	n = start(t, brokers, t.TempDir())
	// The offer's next command, the seller's next change and the draft's
	// next command each meet the garbage.
	body := `{"seller_id":"gina","expected_version":-1,"offer":{"category":"cars","title":"x","price":5,"currency":"RUB"}}`
	status := n.do(t, "PUT", "/v1/offers/"+victim, body, nil)
	if status != 404 {
		t.Errorf("PUT of the offer whose value is garbage: %d, want 404 (absent)", status)
	}
	n.want(t, 200, "PUT", "/v1/offers/"+offers["vin-2"].Offer.ID, body, nil)
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
		return from[topics.OffersTable] && from[topics.CabinetTable] && from[topics.DraftsTable]
	})
	// Valid traffic goes on: a new feed is loaded and counted.
	n.want(t, 202, "POST", "/v1/sellers/gina/feeds/2", feed(4, 5, "t2"), nil)
	n.byExternal(t, "gina", "all", 2+2)
}
