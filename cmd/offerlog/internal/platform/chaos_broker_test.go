package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// TestKill9WithItsBroker kills `offerlog dev`'s form of the platform (the
// broker inside the process that is killed) under writers of disjoint
// offers, and checks that every read agrees with the log afterwards: each
// offer's GET is the offer-table's record, each seller's counters and
// preset lists are a recount of its offers.
func TestKill9WithItsBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("kills platform processes")
	}
	kills := int(chaosInt(t, "OFFERLOG_CHAOS_KILLS", 3))
	seed := chaosInt(t, "OFFERLOG_CHAOS_SEED", uint64(time.Now().UnixNano()))
	t.Logf("OFFERLOG_CHAOS_SEED=%d OFFERLOG_CHAOS_KILLS=%d", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 1))
	p, brokers := insidePlatform(t)
	v := &violations{}
	w := newWriters(p, v)
	stop := runLoads(t, w.loads(12, seed)...)
	for range kills {
		p.waitReady()
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(5*time.Second))))
		p.kill()
		p.kills++
		p.start()
	}
	w.answeredAgain(t)
	stop()
	v.check(t)
	settleAll(t, brokers)

	c := &chaosCheck{t: t, p: p, brokers: brokers}
	table := testkit.Table(t, brokers, topics.OffersTable)
	c.reads(table)
	w.check(t, table)
	if !t.Failed() {
		t.Logf("chaos with the broker inside: %d kills, %d offers told, %d reads compared with the log", p.kills, len(w.told), c.answers)
	}
}

// writers publish an offer each, then update it with the version they
// were last told (statuses and prices moving), delete it now and then and
// publish another.
type writers struct {
	p *chaosPlatform
	v *violations

	mu      sync.Mutex
	n       int
	answers int
	told    map[string]told
	deleted map[string]bool
}

func (w *writers) run(ctx context.Context, seller string, rng *rand.Rand) {
	for ctx.Err() == nil {
		w.mu.Lock()
		w.n++
		n := w.n
		w.mu.Unlock()
		var d schemas.Draft
		if !callUntil(ctx, w.v, w.p.url("/v1/drafts/current"), "POST", fmt.Sprintf(`{"user":%q,"category":"cars"}`, seller), http.StatusOK, &d) {
			return
		}
		body := fmt.Sprintf(`{"user":%q,"offer":{"category":"cars","title":"w %d","price":%d,"currency":"RUB"}}`, seller, n, 1000+n)
		if !callUntil(ctx, w.v, w.p.url("/v1/drafts/"+d.ID), "PUT", body, http.StatusOK, &d) {
			return
		}
		var o offerapi.OfferVersion
		if !callUntil(ctx, w.v, w.p.url("/v1/drafts/"+d.ID+"/publish"), "POST", fmt.Sprintf(`{"user":%q,"version":%d}`, seller, d.Version), http.StatusCreated, &o) {
			return
		}
		id, version := o.Offer.ID, o.Version
		w.tell(id, version, false)
		for i := 0; i < 20+rng.IntN(40) && ctx.Err() == nil; i++ {
			status := []string{"ACTIVE", "INACTIVE", "EXPIRED", "SOLD"}[rng.IntN(4)]
			body := fmt.Sprintf(`{"seller_id":%q,"expected_version":%d,"offer":{"category":"cars","title":"w %d rev %d","price":%d,"currency":"RUB","status":%q}}`,
				seller, version, n, i, 1000+rng.IntN(1000), status)
			s, b, err := request(ctx, "PUT", w.p.url("/v1/offers/"+id), body)
			switch {
			case err != nil || s >= 500:
				retry(ctx)
			case s == http.StatusOK:
				if err := json.Unmarshal(b, &o); err != nil {
					w.v.add("edit %s: %s: %v", id, b, err)
					return
				}
				version = o.Version
				w.tell(id, version, false)
			case s == http.StatusConflict:
				// An offer its writer was told of is never answered 404 (a
				// view catching up after a restart answers 503, tried again).
				if callUntil(ctx, w.v, w.p.url("/v1/offers/"+id), "GET", "", http.StatusOK, &o) {
					version = o.Version
				}
			default:
				w.v.add("edit %s at %d: %d %s", id, version, s, b)
			}
		}
		for tried := false; ctx.Err() == nil; tried = true {
			s, b, err := request(ctx, "DELETE", w.p.url(fmt.Sprintf("/v1/offers/%s?seller_id=%s&expected_version=%d", id, seller, version)), "")
			if err != nil || s >= 500 {
				retry(ctx)
				continue
			}
			if s == http.StatusConflict {
				if callUntil(ctx, w.v, w.p.url("/v1/offers/"+id), "GET", "", http.StatusOK, &o) {
					version = o.Version
				}
				continue
			}
			if s == http.StatusOK || s == http.StatusNoContent || s == http.StatusNotFound && tried {
				w.tell(id, version, true)
			} else {
				w.v.add("delete %s at %d: %d %s", id, version, s, b)
			}
			break
		}
	}
}

func (w *writers) tell(id string, version int64, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answers++
	if version > w.told[id].version {
		w.told[id] = told{version: version}
	}
	if deleted {
		w.deleted[id] = true
	}
}

func newWriters(p *chaosPlatform, v *violations) *writers {
	return &writers{p: p, v: v, told: map[string]told{}, deleted: map[string]bool{}}
}

// loads returns n writers, each a seller of its own.
func (w *writers) loads(n int, seed uint64) []func(context.Context) {
	out := make([]func(context.Context), n)
	for i := range out {
		out[i] = func(ctx context.Context) {
			w.run(ctx, fmt.Sprintf("seller-%d", i), rand.New(rand.NewPCG(seed, uint64(10+i))))
		}
	}
	return out
}

// answered returns how many answers the writers were given.
func (w *writers) answered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answers
}

// answeredAgain waits until the writers are answered again after the last
// fault: more answers than there are writers.
func (w *writers) answeredAgain(t *testing.T) {
	t.Helper()
	answers := w.answered()
	testkit.Eventually(t, 3*time.Minute, "writes answered after the last fault", func() bool { return w.answered() > answers+12 })
}

// check checks what the writers were told against offers-table (table):
// every acknowledged version is there or a later one, every acknowledged
// deletion is.
func (w *writers) check(t *testing.T, table map[string][]byte) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, at := range w.told {
		var rec schemas.OfferRecord
		raw, ok := table[id]
		if ok {
			if err := schemas.OfferRecords.Decode(raw, &rec); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case w.deleted[id]:
			if ok && rec.Offer.Status != schemas.OfferDeleted {
				t.Errorf("offer %s: its deletion was acknowledged, the log has it at version %d", id, rec.Version)
			}
		case !ok:
			t.Errorf("offer %s: told version %d, not in the log", id, at.version)
		case rec.Version < at.version:
			t.Errorf("offer %s: told version %d, the log has %d", id, at.version, rec.Version)
		}
	}
}
