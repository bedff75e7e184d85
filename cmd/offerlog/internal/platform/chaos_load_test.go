package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/processors/numerator/numeratortest"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
)

// A load is what the users of one part of the platform do while it is
// killed under them: it runs until ctx is done and records every answer it
// was given, to be checked once the platform has settled.

// callUntil sends a request until it is answered (not unreachable, not 5xx)
// or ctx is done. An answer with status want is decoded into out and
// reported true; any other answer is a violation.
func callUntil(ctx context.Context, v *violations, url, method, body string, want int, out any) bool {
	for {
		s, b, err := request(ctx, method, url, body)
		switch {
		case err == nil && s == want:
			if out != nil {
				if err := json.Unmarshal(b, out); err != nil {
					v.add("%s %s: %d %s: %v", method, url, s, b, err)
					return false
				}
			}
			return true
		case err == nil && s < 500:
			v.add("%s %s %s: got %d %s, want %d", method, url, body, s, b, want)
			return false
		}
		if !retry(ctx) {
			return false
		}
	}
}

// docLoad posts versions of documents of one client and waits for their
// verdicts: the registry and the indexer.
type docLoad struct {
	p *chaosPlatform
	v *violations

	mu       sync.Mutex
	acked    map[string]int64 // pk -> highest version answered ACCEPTED (or a duplicate of one)
	answered int
}

func (l *docLoad) run(ctx context.Context, rng *rand.Rand) {
	if !callUntil(ctx, l.v, l.p.url("/v1/clients/chaos/epochs/1"), "PUT", epochBody, http.StatusCreated, nil) {
		return
	}
	next := map[string]int64{}
	for ctx.Err() == nil {
		pk := fmt.Sprint("d", rng.IntN(40))
		v := next[pk] + 1
		var verdict struct {
			Verdict string `json:"verdict"`
			Reason  string `json:"reason"`
		}
		// An unanswered post is posted again with the same version: a
		// duplicate if it was accepted.
		if !callUntil(ctx, l.v, l.p.url("/v1/clients/chaos/documents?wait=true"), "POST", docBody(pk, v, ""), http.StatusOK, &verdict) {
			continue
		}
		if verdict.Verdict != "ACCEPTED" && !strings.Contains(verdict.Reason, "duplicate") {
			l.v.add("document %s version %d: verdict %+v", pk, v, verdict)
			continue
		}
		next[pk] = v
		l.mu.Lock()
		l.acked[pk] = v
		l.answered++
		l.mu.Unlock()
	}
}

// told is the newest version of an offer a client was told, and its title
// at that version.
type told struct {
	version int64
	title   string
	seller  string
}

// gostLoad is the offer storage's users: visitors publish drafts, sellers
// edit their offers, a feed is uploaded task after task; the offers, drafts,
// cabinet and feeds groups, and the scheduler's stage on every offer.
type gostLoad struct {
	p *chaosPlatform
	v *violations

	mu      sync.Mutex
	offers  map[string]told   // offer id -> what a client was last told
	ids     []string          // the published offers, for edits
	byDraft map[string]string // draft id -> the offer its publication answered
	ofOffer map[string]string // offer id -> the draft it was published from
	feed    int               // items of the last feed task acknowledged whole
	answers int
}

func (l *gostLoad) url(path string) string { return l.p.url(path) }

func (l *gostLoad) tell(o *offerapi.OfferVersion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers++
	if o.Version > l.offers[o.Offer.ID].version {
		l.offers[o.Offer.ID] = told{o.Version, o.Offer.Title, o.Offer.SellerID}
	}
}

func (l *gostLoad) run(ctx context.Context, rng *rand.Rand) {
	for n, task := 0, 0; ctx.Err() == nil; {
		l.mu.Lock()
		published := len(l.ids)
		l.mu.Unlock()
		switch r := rng.IntN(10); {
		case r < 4 || published == 0:
			n++
			l.publish(ctx, n)
		case r < 9:
			l.edit(ctx, rng)
		default:
			task++
			l.upload(ctx, task)
		}
	}
}

// publish fills and publishes the draft of a new visitor, then publishes it
// again as a client that missed the answer would: both answers must name
// one offer, of this draft only.
func (l *gostLoad) publish(ctx context.Context, n int) {
	user := fmt.Sprint("u", n)
	var d schemas.Draft
	if !callUntil(ctx, l.v, l.url("/v1/drafts/current"), "POST", fmt.Sprintf(`{"user":%q,"category":"cars"}`, user), http.StatusOK, &d) {
		return
	}
	body := fmt.Sprintf(`{"user":%q,"offer":{"category":"cars","title":"offer %d","price":%d,"currency":"RUB"}}`, user, n, 1000+n)
	if !callUntil(ctx, l.v, l.url("/v1/drafts/"+d.ID), "PUT", body, http.StatusOK, &d) {
		return
	}
	for range 2 {
		var o offerapi.OfferVersion
		if !callUntil(ctx, l.v, l.url("/v1/drafts/"+d.ID+"/publish"), "POST", fmt.Sprintf(`{"user":%q,"version":%d}`, user, d.Version), http.StatusCreated, &o) {
			return
		}
		l.mu.Lock()
		if was, ok := l.byDraft[d.ID]; ok && was != o.Offer.ID {
			l.v.add("draft %s published as %s, then as %s", d.ID, was, o.Offer.ID)
		}
		if was, ok := l.ofOffer[o.Offer.ID]; ok && was != d.ID {
			l.v.add("offer %s handed out for drafts %s and %s", o.Offer.ID, was, d.ID)
		}
		if _, ok := l.byDraft[d.ID]; !ok {
			l.ids = append(l.ids, o.Offer.ID)
		}
		l.byDraft[d.ID], l.ofOffer[o.Offer.ID] = o.Offer.ID, d.ID
		l.mu.Unlock()
		l.tell(&o)
	}
}

// edit changes the title of a published offer at the version last seen; a
// conflict (an edit answered late, a stage's change) reads it again.
func (l *gostLoad) edit(ctx context.Context, rng *rand.Rand) {
	l.mu.Lock()
	id := l.ids[rng.IntN(len(l.ids))]
	at := l.offers[id]
	l.mu.Unlock()
	body := fmt.Sprintf(`{"seller_id":%q,"expected_version":%d,"offer":{"category":"cars","title":"%s rev %d","price":%d,"currency":"RUB"}}`,
		at.seller, at.version, id, rng.IntN(1000), 1000+rng.IntN(1000))
	s, b, err := request(ctx, "PUT", l.url("/v1/offers/"+id), body)
	switch {
	case err != nil || s >= 500:
		return
	case s == http.StatusOK:
		var o offerapi.OfferVersion
		if err := json.Unmarshal(b, &o); err != nil {
			l.v.add("edit %s: %s: %v", id, b, err)
			return
		}
		l.tell(&o)
	case s == http.StatusConflict:
		var o offerapi.OfferVersion
		if callUntil(ctx, l.v, l.url("/v1/offers/"+id), "GET", "", http.StatusOK, &o) {
			l.tell(&o)
		}
	default:
		l.v.add("edit %s at %d: %d %s", id, at.version, s, b)
	}
}

// upload sends feed task task (items vin-1.. of a growing list) and
// finishes it, saying how many items it had.
func (l *gostLoad) upload(ctx context.Context, task int) {
	items := min(4+task, 20)
	var b strings.Builder
	for i := 1; i <= items; i++ {
		fmt.Fprintf(&b, `{"external_id":"vin-%d","offer":{"category":"cars","title":"car %d task %d","price":%d,"currency":"RUB"}}`+"\n", i, i, task, 1000+i)
	}
	path := fmt.Sprintf("/v1/sellers/feeder/feeds/%d", task)
	if !callUntil(ctx, l.v, l.url(path), "POST", b.String(), http.StatusAccepted, nil) {
		return
	}
	if !callUntil(ctx, l.v, l.url(path+"/finish"), "POST", fmt.Sprintf(`{"items":%d}`, items), http.StatusAccepted, nil) {
		return
	}
	l.mu.Lock()
	l.feed = items
	l.mu.Unlock()
}

// numeratorLoad sends the offers of generation after generation to the
// numerator and seals each, waiting for its state before the next.
type numeratorLoad struct {
	brokers []string
	v       *violations

	mu     sync.Mutex
	marked int64 // the last generation whose seal was asked for
	sealed int64 // the last generation whose state was published
}

func (l *numeratorLoad) run(ctx context.Context) {
	kafka, err := streams.NewCluster(l.brokers, nil, streams.ClientSettings{})
	if err != nil {
		l.v.add("numerator load: %v", err)
		return
	}
	defer kafka.Close()
	cl, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		l.v.add("numerator load: %v", err)
		return
	}
	defer cl.Close()
	for g := int64(1); ctx.Err() == nil; g++ {
		// The broker is not killed: a generation is sent whole.
		pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := numeratortest.SendGeneration(pctx, cl, g)
		cancel()
		if err != nil {
			l.v.add("numerator load: generation %d: %v", g, err)
			return
		}
		l.mu.Lock()
		l.marked = g
		l.mu.Unlock()
		if numeratortest.WaitSealed(ctx, l.brokers, g) != nil {
			return
		}
		l.mu.Lock()
		l.sealed = g
		l.mu.Unlock()
		// A generation a second at most: the uninterrupted run the check
		// compares with seals them all again.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
