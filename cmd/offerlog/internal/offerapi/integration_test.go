package offerapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/offerv1"
)

// gostComponents are the components the offer storage's tests run.
var gostComponents = []string{platform.ComponentOffers, platform.ComponentDrafts, platform.ComponentCabinet,
	platform.ComponentFeeds, platform.ComponentAPI}

// node is a platform process of the offer storage started by a test.
type node struct {
	info platform.Info
	stop func()
}

func start(t *testing.T, brokers []string, dataDir string) *node {
	t.Helper()
	cfg := platformtest.Config(dataDir)
	cfg.Brokers, cfg.Components = brokers, gostComponents
	r := platformtest.Start(t, cfg)
	return &node{info: r.Info, stop: func() { _ = r.Stop() }} // the test's cleanup reports an error
}

// do sends a JSON request and decodes a JSON answer into out (if not nil).
func (n *node) do(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.info.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// want fails unless a request answers status.
func (n *node) want(t *testing.T, status int, method, path, body string, out any) {
	t.Helper()
	var raw json.RawMessage
	got := n.do(t, method, path, body, &raw)
	if got != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, got, raw, status)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *node) counters(t *testing.T, seller string) schemas.SellerCabinet {
	t.Helper()
	var c schemas.SellerCabinet
	n.want(t, http.StatusOK, "GET", "/v1/sellers/"+seller+"/counters", "", &c)
	return c
}

// eventuallyCounters waits until the seller's counters are want (active,
// expired, banned, sold, money earned) and preset "all" holds all.
func (n *node) eventuallyCounters(t *testing.T, seller string, all int64, want [5]int64) {
	t.Helper()
	var got schemas.SellerCabinet
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = n.counters(t, seller)
		if [5]int64{got.Active, got.Expired, got.Banned, got.Sold, got.MoneyEarned} == want && got.Presets.Get("all") == all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters of %s: %+v, want all %d and %v", seller, got, all, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const offerBody = `{"category":"cars","title":"Lada Niva","price":450000,"currency":"RUB","photos":[{"source_url":"https://img.example/1.jpg"}]}`

func TestOfferAPIRoundTrips(t *testing.T) {
	b := testkit.Broker(t, "")
	n := start(t, b.Addrs(), t.TempDir())

	// An anonymous visitor starts a draft, fills it, logs in: the draft is
	// handed over, keeping its id, and published.
	var d schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"visitor-1","category":"cars"}`, &d)
	if d.Owner != "anon:visitor-1" || d.Category != "cars" || len(d.ID) != 11 {
		t.Fatalf("new draft %+v", d)
	}
	id := d.ID
	n.want(t, 200, "PUT", "/v1/drafts/"+id, `{"anon":"visitor-1","offer":`+offerBody+`}`, &d)
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"visitor-1","user":"alice","category":"cars"}`, &d)
	if d.ID != id || d.Owner != "user:alice" || d.Offer.Title != "Lada Niva" || d.Offer.SellerID != "alice" {
		t.Fatalf("handed-over draft %+v", d)
	}
	var again schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"anon":"visitor-1","category":"cars"}`, &again)
	if again.ID == id {
		t.Errorf("the anonymous visitor still has the handed-over draft %s", id)
	}
	n.want(t, 409, "PUT", "/v1/drafts/"+again.ID, `{"user":"alice","offer":`+offerBody+`}`, nil)

	var o offerapi.OfferVersion
	n.want(t, 201, "POST", "/v1/drafts/"+id+"/publish", fmt.Sprintf(`{"user":"alice","version":%d}`, d.Version), &o)
	if o.Offer.ID != id || o.Version != 1 || o.Offer.Status != schemas.OfferActive || o.Offer.SellerID != "alice" ||
		len(o.Offer.Photos) != 1 || o.Offer.Photos[0].Status != schemas.PhotoPending {
		t.Fatalf("published %+v", o)
	}
	var fresh schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"user":"alice"}`, &fresh)
	if fresh.ID == id {
		t.Errorf("the published draft is still alice's draft")
	}

	// Reads and writes with the expected version.
	n.want(t, 200, "GET", "/v1/offers/"+id, "", &o)
	upd := strings.Replace(offerBody, "Lada Niva", "Lada Niva 4x4", 1)
	n.want(t, 200, "PUT", "/v1/offers/"+id, `{"seller_id":"alice","expected_version":1,"offer":`+upd+`}`, &o)
	if o.Version != 2 || o.Offer.Title != "Lada Niva 4x4" || o.Offer.Photos[0].Status != schemas.PhotoPending {
		t.Fatalf("updated %+v", o)
	}
	var conflict struct {
		Error   string `json:"error"`
		Version int64  `json:"version"`
	}
	n.want(t, 409, "PUT", "/v1/offers/"+id, `{"seller_id":"alice","expected_version":1,"offer":`+upd+`}`, &conflict)
	if conflict.Version != 2 {
		t.Errorf("conflict answer %+v", conflict)
	}

	// Bad input is answered with the field at fault, and changes nothing.
	var bad struct{ Field string }
	n.want(t, 422, "PUT", "/v1/offers/"+id, `{"seller_id":"alice","expected_version":2,"offer":{"category":"cars","title":""}}`, &bad)
	if bad.Field != "title" {
		t.Errorf("field %q", bad.Field)
	}
	n.want(t, 422, "PUT", "/v1/offers/"+id, `{"seller_id":"alice","offer":`+upd+`}`, &bad)
	if bad.Field != "expected_version" {
		t.Errorf("field %q", bad.Field)
	}
	n.want(t, 400, "PUT", "/v1/offers/"+id, `{"seller_id":"alice","expected_version":2,"offer":`+upd+`,"extra":1}`, nil)
	n.want(t, 404, "GET", "/v1/offers/12345678901", "", nil)
	n.want(t, 404, "PUT", "/v1/offers/"+id, `{"seller_id":"mallory","expected_version":-1,"offer":`+upd+`}`, nil)
	n.want(t, 422, "POST", "/v1/drafts/"+fresh.ID+"/publish", `{"user":"alice"}`, nil) // an empty draft
	n.want(t, 422, "GET", "/v1/sellers/alice/offers?preset=nope", "", nil)
	n.want(t, 200, "GET", "/v1/offers/"+id, "", &o)
	if o.Version != 2 {
		t.Errorf("a refused write changed the offer: %+v", o)
	}
	n.eventuallyCounters(t, "alice", 1, [5]int64{1, 0, 0, 0, 0})

	// The same operations over gRPC.
	conn, err := grpc.NewClient(n.info.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := offerv1.NewOfferServiceClient(conn)
	ctx := testkit.Context(t, time.Minute)
	got, err := gc.GetOffer(ctx, &offerv1.GetOfferRequest{Id: id})
	if err != nil || got.Version != 2 || got.Offer.Title != "Lada Niva 4x4" || got.Offer.GetPrice() != 450000 {
		t.Fatalf("grpc get: %v %v", got, err)
	}
	p := int64(400000)
	sold, err := gc.UpdateOffer(ctx, &offerv1.UpdateOfferRequest{SellerId: "alice", Id: id, ExpectedVersion: 2,
		Offer: &offerv1.Offer{Category: "cars", Title: "Lada Niva 4x4", Price: &p, Currency: "RUB", Status: "SOLD",
			Photos: []*offerv1.Photo{{SourceUrl: "https://img.example/1.jpg"}}}})
	if err != nil || sold.Version != 3 || sold.Offer.Status != "SOLD" {
		t.Fatalf("grpc update: %v %v", sold, err)
	}
	if _, err := gc.UpdateOffer(ctx, &offerv1.UpdateOfferRequest{SellerId: "alice", Id: id, ExpectedVersion: 2,
		Offer: &offerv1.Offer{Category: "cars", Title: "x"}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("grpc stale update: %v", err)
	}
	// min_version: the version a write answered is read at once; a later
	// one is waited for (here until the caller's deadline).
	if got, err := gc.GetOffer(ctx, &offerv1.GetOfferRequest{Id: id, MinVersion: sold.Version}); err != nil || got.Version < sold.Version {
		t.Errorf("grpc get at min_version %d: %v %v", sold.Version, got, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	if got, err := gc.GetOffer(short, &offerv1.GetOfferRequest{Id: id, MinVersion: sold.Version + 100}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("grpc get of a version not written: %v %v", got, err)
	}
	cancel()
	if _, err := gc.GetOffer(ctx, &offerv1.GetOfferRequest{Id: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("grpc get of no offer: %v", err)
	}
	n.eventuallyCounters(t, "alice", 1, [5]int64{0, 0, 0, 1, 400000})
	list, err := gc.ListOffers(ctx, &offerv1.ListOffersRequest{SellerId: "alice", Preset: "sold"})
	if err != nil || len(list.Offers) != 1 || list.Offers[0].Offer.Id != id || list.Total != 1 {
		t.Fatalf("grpc list: %v %v", list, err)
	}
	c, err := gc.GetCounters(ctx, &offerv1.GetCountersRequest{SellerId: "alice"})
	if err != nil || c.Sold != 1 || c.MoneyEarned != 400000 {
		t.Errorf("grpc counters: %v %v", c, err)
	}
	gd, err := gc.CurrentDraft(ctx, &offerv1.CurrentDraftRequest{User: "alice"})
	if err != nil || gd.Id != fresh.ID {
		t.Errorf("grpc current draft: %v %v", gd, err)
	}

	// Delete with the expected version; sales stay counted.
	n.want(t, 409, "DELETE", "/v1/offers/"+id+"?seller_id=alice&expected_version=2", "", nil)
	n.want(t, 200, "DELETE", "/v1/offers/"+id+"?seller_id=alice&expected_version=3", "", nil)
	n.want(t, 404, "GET", "/v1/offers/"+id, "", nil)
	n.eventuallyCounters(t, "alice", 0, [5]int64{0, 0, 0, 1, 400000})
}
