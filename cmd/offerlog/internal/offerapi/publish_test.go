package offerapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// Publishing is one command: the offer's id is a function of the draft, so
// retries (before and after the seller has a new draft, after an update of
// the offer) all answer the same offer, and a draft whose id another offer
// holds is published under the next id of its chain, the same every time.
func TestPublishIsOneCommandWithAnIDOfTheDraft(t *testing.T) {
	b := testkit.Broker(t, "")
	n := start(t, b.Addrs(), t.TempDir())

	// Another seller's offer holds id X; bob's draft has the same id.
	x := offers.IDFrom(424242)
	other := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: x, SellerID: "zed", ExpectedVersion: -1,
		Offer: &schemas.Offer{Category: "cars", Title: "Zed's car"}, DraftOwner: drafts.UserKey("zed"), DraftID: x}
	put(t, b.Addrs(), topics.OffersCommands, x, schemas.OfferCommands, other)
	put(t, b.Addrs(), topics.DraftsCommands, drafts.UserKey("bob"), schemas.DraftCommands,
		&schemas.DraftCommand{Kind: schemas.DraftCurrent, User: "bob", NewID: x})
	var d schemas.Draft
	eventually(t, func() bool {
		return n.do(t, "PUT", "/v1/drafts/"+x, `{"user":"bob","offer":`+offerBody+`}`, &d) == http.StatusOK
	})
	var zed offerapi.OfferVersion
	eventually(t, func() bool { return n.do(t, "GET", "/v1/offers/"+x, "", &zed) == http.StatusOK })

	var o offerapi.OfferVersion
	n.want(t, 201, "POST", "/v1/drafts/"+x+"/publish", fmt.Sprintf(`{"user":"bob","version":%d}`, d.Version), &o)
	want := offers.NextID(drafts.UserKey("bob"), x, x)
	if o.Offer.ID != want || o.Offer.SellerID != "bob" || o.Version != 1 || o.Offer.Title != "Lada Niva" {
		t.Fatalf("published %+v, want offer %s of bob at version 1", o, want)
	}
	// A retry answers the same offer; so does one after the seller has a
	// new draft, and one after the offer was updated.
	var again offerapi.OfferVersion
	n.want(t, 201, "POST", "/v1/drafts/"+x+"/publish", `{"user":"bob"}`, &again)
	if again.Offer.ID != want || again.Version != 1 {
		t.Errorf("retried publish: %+v", again)
	}
	var fresh schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"user":"bob"}`, &fresh)
	if fresh.ID == x {
		t.Fatalf("the published draft is still bob's current draft")
	}
	upd := strings.Replace(offerBody, "Lada Niva", "Lada Niva 4x4", 1)
	n.want(t, 200, "PUT", "/v1/offers/"+want, `{"seller_id":"bob","expected_version":1,"offer":`+upd+`}`, nil)
	n.want(t, 201, "POST", "/v1/drafts/"+x+"/publish", `{"user":"bob"}`, &again)
	if again.Offer.ID != want || again.Version != 2 || again.Offer.Title != "Lada Niva 4x4" {
		t.Errorf("publish retried after an update: %+v", again)
	}
	n.want(t, 200, "GET", "/v1/offers/"+x, "", &o)
	if o.Offer.SellerID != "zed" || o.Version != zed.Version {
		t.Errorf("the offer holding the draft's id changed: %+v", o)
	}
	// Bob has one offer: the publishes and their retries made no other.
	n.eventuallyCounters(t, "bob", 1, [5]int64{1, 0, 0, 0, 0})
	// A draft never published is not found; another seller cannot publish it.
	n.want(t, 404, "POST", "/v1/drafts/"+fresh.ID+"/publish", `{"user":"mallory"}`, nil)
	n.want(t, 404, "POST", "/v1/drafts/"+offers.IDFrom(7)+"/publish", `{"user":"bob"}`, nil)
	// With the version the seller claims to have seen, too (it waited for
	// the drafts view to show it, and answered 504).
	n.want(t, 404, "POST", "/v1/drafts/"+offers.IDFrom(8)+"/publish", `{"user":"bob","version":3}`, nil)
}

func put[T any](t *testing.T, brokers []string, topic, key string, c *schemas.Codec[T], v *T) {
	t.Helper()
	data, err := c.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, brokers, topic, []byte(key), data)
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
