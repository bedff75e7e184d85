package offerapi_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// feed returns NDJSON items vin-<from>..vin-<to> titled with tag.
func feed(from, to int, tag string) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, `{"external_id":"vin-%d","offer":{"category":"cars","title":"car %d %s","price":%d,"currency":"RUB"}}`+"\n", i, i, tag, 1000+i)
	}
	return b.String()
}

// page lists one page of a seller's preset.
func (n *node) page(t *testing.T, seller, preset, token string, limit int) offerapi.Page {
	t.Helper()
	var p offerapi.Page
	n.want(t, http.StatusOK, "GET", fmt.Sprintf("/v1/sellers/%s/offers?preset=%s&limit=%d&page_token=%s", seller, preset, limit, token), "", &p)
	return p
}

// listAll pages through a seller's preset and returns the offers in order.
func (n *node) listAll(t *testing.T, seller, preset string, limit int) []*offerapi.OfferVersion {
	t.Helper()
	var all []*offerapi.OfferVersion
	token := ""
	for pages := 0; ; pages++ {
		p := n.page(t, seller, preset, token, limit)
		if len(p.Offers) > limit || pages > 1000 {
			t.Fatalf("page of %d offers with limit %d", len(p.Offers), limit)
		}
		all = append(all, p.Offers...)
		if p.NextPageToken == "" {
			return all
		}
		token = p.NextPageToken
	}
}

// byExternal waits until the seller's preset lists want offers and returns
// them by external id.
func (n *node) byExternal(t *testing.T, seller, preset string, want int) map[string]*offerapi.OfferVersion {
	t.Helper()
	var out map[string]*offerapi.OfferVersion
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d offers in %s's %s", want, seller, preset), func() bool {
		out = map[string]*offerapi.OfferVersion{}
		for _, o := range n.listAll(t, seller, preset, 7) {
			out[o.Offer.ExternalID] = o
		}
		return len(out) == want
	})
	return out
}

func TestFeedsPhotosModerationAndPaging(t *testing.T) {
	b := testkit.Broker(t, "")
	n := start(t, b.Addrs(), t.TempDir())
	brokers := b.Addrs()
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, 3*time.Minute)

	// Task 1 creates 25 offers.
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/1", feed(1, 25, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/1/finish", "", nil)
	first := n.byExternal(t, "bob", "active", 25)
	n.eventuallyCounters(t, "bob", 25, [5]int64{25, 0, 0, 0, 0})

	// Pages hold every offer once, newest first.
	all := n.listAll(t, "bob", "all", 10)
	if len(all) != 25 {
		t.Fatalf("%d offers listed", len(all))
	}
	seen := map[string]bool{}
	for i, o := range all {
		if seen[o.Offer.ID] {
			t.Errorf("%s listed twice", o.Offer.ID)
		}
		seen[o.Offer.ID] = true
		if i > 0 && o.Offer.CreatedAt.After(all[i-1].Offer.CreatedAt) {
			t.Errorf("offer %d created after the one before it", i)
		}
	}
	if p := n.page(t, "bob", "all", "", 10); p.Total != 25 || len(p.Offers) != 10 || p.NextPageToken == "" {
		t.Errorf("first page: total %d, %d offers, token %q", p.Total, len(p.Offers), p.NextPageToken)
	}
	n.want(t, 422, "GET", "/v1/sellers/bob/offers?page_token=bm9wZQ", "", nil)

	// Moderation bans vin-3; photos arrive for nobody's photo and are ignored.
	banned := first["vin-3"].Offer.ID
	op, _ := schemas.ModerationOpinions.Encode(&schemas.ModerationOpinion{OfferID: banned, Banned: true, Reasons: []string{"fraud"}})
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topics.ModerationOpinions, Key: []byte(banned), Value: op}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n.eventuallyCounters(t, "bob", 25, [5]int64{24, 0, 1, 0, 0})

	// Task 2 has vin-1..20 and a new vin-26: 21..25 are deleted at its end;
	// the ban on vin-3 stays; ids of matched offers are kept.
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/2", feed(1, 20, "t2")+feed(26, 26, "t2"), nil)
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/2/finish", "", nil)
	n.eventuallyCounters(t, "bob", 21, [5]int64{20, 0, 1, 0, 0})
	second := n.byExternal(t, "bob", "all", 21)
	for ext, o := range second {
		if old, ok := first[ext]; ok && old.Offer.ID != o.Offer.ID {
			t.Errorf("%s changed id from %s to %s", ext, old.Offer.ID, o.Offer.ID)
		}
		if !strings.HasSuffix(o.Offer.Title, "t2") {
			t.Errorf("%s not updated by task 2: %q", ext, o.Offer.Title)
		}
	}
	if !second["vin-3"].Banned {
		t.Error("a feed update lifted the ban")
	}
	for i := 21; i <= 25; i++ {
		if _, ok := second[fmt.Sprint("vin-", i)]; ok {
			t.Errorf("vin-%d survived a feed without it", i)
		}
		n.want(t, 404, "GET", "/v1/offers/"+first[fmt.Sprint("vin-", i)].Offer.ID, "", nil)
	}

	// A late item of task 1 is ignored; a bad item is refused whole.
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/1", feed(5, 5, "late"), nil)
	n.want(t, 422, "POST", "/v1/sellers/bob/feeds/3", feed(1, 1, "t3")+`{"external_id":"","offer":{"category":"cars","title":"x"}}`+"\n", nil)
	n.want(t, 400, "POST", "/v1/sellers/bob/feeds/3", "{nope\n", nil)
	// Task 3 touches vin-5 only: the late task-1 item must not have changed it.
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/3", feed(5, 5, "t3"), nil)
	n.want(t, 202, "POST", "/v1/sellers/bob/feeds/3/finish", "", nil)
	n.eventuallyCounters(t, "bob", 1, [5]int64{1, 0, 0, 0, 0})
	var v5 offerapi.OfferVersion
	n.want(t, 200, "GET", "/v1/offers/"+first["vin-5"].Offer.ID, "", &v5)
	if v5.Offer.Title != "car 5 t3" {
		t.Errorf("vin-5 is %q", v5.Offer.Title)
	}

	// Photos: a published offer's photos are requested, answers added.
	var d schemas.Draft
	n.want(t, 200, "POST", "/v1/drafts/current", `{"user":"carol","category":"cars"}`, &d)
	n.want(t, 200, "PUT", "/v1/drafts/"+d.ID, `{"user":"carol","offer":`+offerBody+`}`, &d)
	var o offerapi.OfferVersion
	n.want(t, 201, "POST", "/v1/drafts/"+d.ID+"/publish", fmt.Sprintf(`{"user":"carol","version":%d}`, d.Version), &o)
	testkit.Eventually(t, 30*time.Second, "a photo request", func() bool {
		for _, r := range testkit.ReadAll(t, brokers, topics.PhotosRequests) {
			var req schemas.PhotoRequest
			if schemas.PhotoRequests.Decode(r.Value, &req) == nil && req.OfferID == o.Offer.ID && req.SourceURL == "https://img.example/1.jpg" {
				return true
			}
		}
		return false
	})
	pr, _ := schemas.PhotoResults.Encode(&schemas.PhotoResult{OfferID: o.Offer.ID, SourceURL: "https://img.example/1.jpg", OK: true, URL: "https://avatars.example/1"})
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topics.PhotosResults, Key: []byte(o.Offer.ID), Value: pr}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the processed photo on the offer", func() bool {
		n.want(t, 200, "GET", "/v1/offers/"+o.Offer.ID, "", &o)
		return o.Offer.Photos[0].Status == schemas.PhotoReady && o.Offer.Photos[0].URL == "https://avatars.example/1"
	})

	// Undecodable input goes to offers.dead with its reason; the
	// aggregate keeps going.
	junk := offers.IDFrom(99)
	if err := prod.ProduceSync(ctx,
		&kgo.Record{Topic: topics.OffersCommands, Key: []byte(junk), Value: []byte("not avro")},
		&kgo.Record{Topic: topics.ModerationOpinions, Key: []byte(junk), Value: []byte{0xc3, 0x01}},
		&kgo.Record{Topic: topics.FeedsIngest, Key: []byte("bob"), Value: []byte("junk")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "three dead letters", func() bool {
		var dead []string
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersDead) {
			var dl schemas.DeadLetter
			if schemas.DeadLetters.Decode(r.Value, &dl) == nil && strings.Contains(dl.Reason, "undecodable") {
				dead = append(dead, dl.Topic)
			}
		}
		slices.Sort(dead)
		return slices.Equal(dead, []string{topics.FeedsIngest, topics.ModerationOpinions, topics.OffersCommands})
	})
	n.want(t, 200, "PUT", "/v1/offers/"+o.Offer.ID, `{"seller_id":"carol","expected_version":-1,"offer":`+offerBody+`}`, nil)
}

// TestEventsInOrderPerOffer updates a few offers from concurrent writers
// and checks offers.events: per offer, versions never go back and never
// skip one (a repeat is at-least-once delivery).
func TestEventsInOrderPerOffer(t *testing.T) {
	b := testkit.Broker(t, "")
	n := start(t, b.Addrs(), t.TempDir())
	n.want(t, 202, "POST", "/v1/sellers/dave/feeds/1", feed(1, 5, "t1"), nil)
	ids := n.byExternal(t, "dave", "all", 5)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				for _, o := range ids {
					body := fmt.Sprintf(`{"seller_id":"dave","expected_version":-1,"offer":{"category":"cars","title":"w%d i%d"}}`, w, i)
					if code := n.do(t, "PUT", "/v1/offers/"+o.Offer.ID, body, nil); code != 200 {
						t.Errorf("update: %d", code)
					}
				}
			}
		}()
	}
	wg.Wait()
	want := map[string]int64{}
	for _, o := range ids {
		var cur offerapi.OfferVersion
		n.want(t, 200, "GET", "/v1/offers/"+o.Offer.ID, "", &cur)
		want[o.Offer.ID] = cur.Version
		if cur.Version != 61 {
			t.Errorf("%s at version %d after 60 updates", o.Offer.ID, cur.Version)
		}
	}
	last := map[string]int64{}
	testkit.Eventually(t, 30*time.Second, "every event", func() bool {
		clear(last)
		for _, r := range testkit.ReadAll(t, b.Addrs(), topics.OffersEvents) {
			var e schemas.OfferEvent
			if err := schemas.OfferEvents.Decode(r.Value, &e); err != nil {
				t.Fatal(err)
			}
			id := string(r.Key)
			if prev := last[id]; e.Version < prev || e.Version > prev+1 {
				t.Fatalf("%s: version %d after %d", id, e.Version, prev)
			}
			last[id] = e.Version
		}
		for id, v := range want {
			if last[id] != v {
				return false
			}
		}
		return true
	})
}

// A failed or partial upload never removes anything: only a task that ends
// whole deletes the offers it did not have.
func TestFailedOrPartialFeedRemovesNothing(t *testing.T) {
	b := testkit.Broker(t, "")
	n := start(t, b.Addrs(), t.TempDir())

	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/1", feed(1, 3, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/1/finish", `{"items":3}`, nil)
	n.eventuallyCounters(t, "dan", 3, [5]int64{3, 0, 0, 0, 0})

	// Task 2 failed after vin-1: nothing is removed. The loader handles a
	// seller's records in order, so once task 3's new vin-4 is counted,
	// task 2's end was handled before it: had it removed vin-2 and vin-3,
	// the count would never reach 4.
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/2", feed(1, 1, "t2"), nil)
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/2/finish", `{"failed":true}`, nil)
	// Task 3 says it uploaded 3 items; 2 arrived: partial, nothing removed.
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/3", feed(1, 1, "t3")+feed(4, 4, "t3"), nil)
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/3/finish", `{"items":3}`, nil)
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/4", feed(5, 5, "t4"), nil)
	n.eventuallyCounters(t, "dan", 5, [5]int64{5, 0, 0, 0, 0})

	// Bad ends are refused.
	n.want(t, 422, "POST", "/v1/sellers/dan/feeds/4/finish", `{"items":-1}`, nil)
	n.want(t, 400, "POST", "/v1/sellers/dan/feeds/4/finish", `{"items":"many"}`, nil)
	n.want(t, 400, "POST", "/v1/sellers/dan/feeds/4/finish", `{"partial":true}`, nil)

	// Task 4 ends whole: every offer it did not have goes.
	n.want(t, 202, "POST", "/v1/sellers/dan/feeds/4/finish", `{"items":1}`, nil)
	n.eventuallyCounters(t, "dan", 1, [5]int64{1, 0, 0, 0, 0})

	// Each task's status says how it ended, with its counts.
	for task, want := range map[int]offerapi.FeedTaskStatus{
		1: {FeedStatus: schemas.FeedStatus{State: schemas.FeedDone, Received: 3, Applied: 3, Uploaded: 3}, Summary: "3 of 3 offers applied; done"},
		2: {FeedStatus: schemas.FeedStatus{State: schemas.FeedFailed, Received: 1, Applied: 1, Reason: "the upload failed"},
			Summary: "1 of 1 offers applied; the upload failed"},
		3: {FeedStatus: schemas.FeedStatus{State: schemas.FeedPartial, Received: 2, Applied: 2, Uploaded: 3,
			Reason: "2 of the 3 items uploaded were loaded"}, Summary: "2 of 3 offers applied; 2 of the 3 items uploaded were loaded"},
		4: {FeedStatus: schemas.FeedStatus{State: schemas.FeedDone, Received: 1, Applied: 1, Uploaded: 1, Deleted: 4},
			Summary: "1 of 1 offers applied, 4 removed; done"},
	} {
		var got offerapi.FeedTaskStatus
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("task %d's status", task), func() bool {
			n.want(t, 200, "GET", fmt.Sprintf("/v1/sellers/dan/feeds/%d", task), "", &got)
			return got.State == want.State
		})
		got.UpdatedAt, got.Accepted = time.Time{}, 0
		want.SellerID, want.TaskID = "dan", int64(task)
		if got != want {
			t.Errorf("task %d:\n got %+v\nwant %+v", task, got, want)
		}
	}
	n.want(t, 404, "GET", "/v1/sellers/dan/feeds/99", "", nil)
	n.want(t, 422, "GET", "/v1/sellers/dan/feeds/0", "", nil)
}

// TestLeftoversGoInRounds: a task that keeps one of 2 100 offers deletes
// the others in rounds of at most feeds.Round, read as ranges of
// feeds.tasks (the seed's "task_id < ? LIMIT 1000"), and the seller ends
// with the one.
func TestLeftoversGoInRounds(t *testing.T) {
	b := testkit.Broker(t, "")
	n := start(t, b.Addrs(), t.TempDir())
	const items = 2*feeds.Round + 100
	n.want(t, 202, "POST", "/v1/sellers/eve/feeds/1", feed(1, items, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/eve/feeds/1/finish", fmt.Sprintf(`{"items":%d}`, items), nil)
	n.eventuallyCounters(t, "eve", items, [5]int64{items, 0, 0, 0, 0})
	// A large seller is not one hot key of the cabinet: its counters are
	// spread over offers.CabinetSpread keys, on several partitions, and
	// the counters read are their sum.
	keys, partitions := map[string]bool{}, map[int32]bool{}
	for _, r := range testkit.ReadAll(t, b.Addrs(), topics.CabinetTable) {
		if strings.HasPrefix(string(r.Key), "eve/") {
			keys[string(r.Key)], partitions[r.Partition] = true, true
		}
	}
	if len(keys) != offers.CabinetSpread || len(partitions) < 2 {
		t.Errorf("eve's cabinet is %d keys on %d partitions, want %d keys on several", len(keys), len(partitions), offers.CabinetSpread)
	}
	before := n.metric(t, "offerlog_feeds_delete_rounds_total")
	n.want(t, 202, "POST", "/v1/sellers/eve/feeds/2", feed(7, 7, "t2"), nil)
	n.want(t, 202, "POST", "/v1/sellers/eve/feeds/2/finish", `{"items":1}`, nil)
	n.eventuallyCounters(t, "eve", 1, [5]int64{1, 0, 0, 0, 0})
	if rounds := n.metric(t, "offerlog_feeds_delete_rounds_total") - before; rounds < 3 {
		t.Errorf("%d leftovers deleted in %v rounds, want at least 3 of at most %d", items-1, rounds, feeds.Round)
	}
	var st struct {
		State   string `json:"state"`
		Deleted int64  `json:"deleted"`
	}
	n.want(t, 200, "GET", "/v1/sellers/eve/feeds/2", "", &st)
	if st.State != string(schemas.FeedDone) || st.Deleted != items-1 {
		t.Errorf("task 2's status %+v, want DONE with %d deleted", st, items-1)
	}
}

// metric returns the value of an unlabelled metric on the node's /metrics.
func (n *node) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.info.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
