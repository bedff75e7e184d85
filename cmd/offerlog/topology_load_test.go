package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/numerator/numeratortest"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// topologyHTTP is the load's and the probes' client: a request that takes
// longer than a write's wait (the manifests' --wait-timeout is the
// default, 10 s) has failed.
var topologyHTTP = &http.Client{Timeout: 20 * time.Second}

// topologyLoad is the steady mixed load of the topology test: documents
// with ?wait=true, offers published from drafts and updated, reads of
// offers through the serving cache; spread over the API processes in
// service, as their Service spreads it. It remembers every write a client
// was given an answer for.
type topologyLoad struct {
	t     *testing.T
	c     *cluster
	token string
	// docWorkers write documents, each at most once per pace (0: as fast
	// as answered); the short form paces its load, which shares 2 cores
	// with the rest of the suite.
	docWorkers int
	pace       *rate.Limiter

	mu      sync.Mutex
	ok      map[int64]int // successful writes per second
	errs    []loadError
	docs    map[string]int64  // acknowledged version per document pk
	current map[string]int64  // the registry's version per document pk, after the load
	offers  map[string]int64  // acknowledged version per offer id
	drafts  map[string]string // offer id → the draft it was published from
	sellers map[string]int    // offers published per seller
	tasks   []int64           // feed tasks whose end was acknowledged
	marked  int64             // the last numerator generation whose seal was sent
}

type loadError struct {
	at   time.Time
	what string
}

const topologyEpoch = `{"fields":[{"name":"title","type":"string","required":true},{"name":"price","type":"int64"}]}`

func newTopologyLoad(t *testing.T, c *cluster) *topologyLoad {
	tok, err := os.ReadFile(filepath.Join(c.secrets, "offerlog-tokens", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	l := &topologyLoad{t: t, c: c, token: strings.TrimSpace(string(tok)), docWorkers: 4, pace: rate.NewLimiter(rate.Inf, 1),
		ok: map[int64]int{}, docs: map[string]int64{},
		offers: map[string]int64{}, drafts: map[string]string{}, sellers: map[string]int{}}
	if s, b, err := l.call(context.Background(), "PUT", "/v1/clients/shop/epochs/1", topologyEpoch); err != nil || s/100 != 2 {
		t.Fatalf("register the epoch: %d %s %v", s, b, err)
	}
	return l
}

// api returns an API pod in service: started, not stopped by the nemesis
// (a Service's endpoints are its ready pods; a pod frozen or cut off stays
// one until its probes fail, and its clients see that).
func (l *topologyLoad) api() *pod {
	var in []*pod
	for _, p := range l.c.podsOf("api") {
		p.mu.Lock()
		if p.cmd != nil && !p.expected {
			in = append(in, p)
		}
		p.mu.Unlock()
	}
	if len(in) == 0 {
		return nil
	}
	return in[rand.IntN(len(in))]
}

func (l *topologyLoad) call(ctx context.Context, method, path, body string) (int, []byte, error) {
	p := l.api()
	if p == nil {
		return 0, nil, fmt.Errorf("no API pod in service")
	}
	return l.callPod(ctx, p, method, path, body)
}

func (l *topologyLoad) callPod(ctx context.Context, p *pod, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.http+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := topologyHTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// record counts an answer: a success, or an error by its kind.
func (l *topologyLoad) record(what string, status int, err error, want ...int) bool {
	ok := err == nil && slices.Contains(want, status)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if ok {
		l.ok[now.Unix()]++
		return true
	}
	kind := fmt.Sprintf("%s: %d", what, status)
	if err != nil {
		kind = what + ": " + errorKind(err)
	}
	if len(l.errs) < 100000 {
		l.errs = append(l.errs, loadError{now, kind})
	}
	return false
}

func errorKind(err error) string {
	s := err.Error()
	for _, k := range []string{"connection refused", "Client.Timeout", "context deadline exceeded", "connection reset", "EOF", "no route to host", "no API pod"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return s
}

// run starts the load's workers; the channel is closed when they stopped.
func (l *topologyLoad) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range l.docWorkers {
		wg.Go(func() { l.documents(ctx, w) })
	}
	for w := range 2 {
		wg.Go(func() { l.offerWrites(ctx, w) })
	}
	wg.Go(func() { l.reads(ctx) })
	wg.Go(func() { l.feeds(ctx) })
	wg.Go(func() { l.numerator(ctx) })
	go func() { wg.Wait(); close(done) }()
	return done
}

func (l *topologyLoad) documents(ctx context.Context, w int) {
	versions := map[string]int64{}
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for i := 0; ctx.Err() == nil; i++ {
		if l.pace.Wait(ctx) != nil {
			return
		}
		pk := fmt.Sprintf("w%d-%d", w, i%25)
		versions[pk]++
		v := versions[pk]
		body := fmt.Sprintf(`{"pk":%q,"version":%d,"epoch":1,"action":"UPSERT","timestamp":%q,"fields":{"title":"t%d","price":%d}}`, pk, v, ts, v, v)
		s, b, err := l.call(ctx, "POST", "/v1/clients/shop/documents?wait=true", body)
		if ctx.Err() != nil {
			return
		}
		if l.record("document", s, err, 200) && bytes.Contains(b, []byte(`"ACCEPTED"`)) {
			l.mu.Lock()
			l.docs[pk] = max(l.docs[pk], v)
			l.mu.Unlock()
		} else if err != nil || s >= 500 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

type offerAnswer struct {
	Offer struct {
		ID string `json:"id"`
	} `json:"offer"`
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

func (l *topologyLoad) offerWrites(ctx context.Context, w int) {
	seller := fmt.Sprintf("seller-%d", w)
	var mine []string
	for i := 0; ctx.Err() == nil; i++ {
		if l.pace.Wait(ctx) != nil {
			return
		}
		if len(mine) == 0 || i%10 == 0 {
			if id, ok := l.publish(ctx, seller); ok {
				mine = append(mine, id)
			}
			continue
		}
		id := mine[rand.IntN(len(mine))]
		body := fmt.Sprintf(`{"seller_id":%q,"expected_version":-1,"offer":{"category":"cars","title":"car %d","price":%d,"currency":"RUB"}}`, seller, i, 1000+i)
		s, b, err := l.call(ctx, "PUT", "/v1/offers/"+id, body)
		if ctx.Err() != nil {
			return
		}
		var a offerAnswer
		if l.record("offer update", s, err, 200) && json.Unmarshal(b, &a) == nil {
			l.mu.Lock()
			l.offers[id] = max(l.offers[id], a.Version)
			l.mu.Unlock()
		} else if err != nil || s >= 500 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// publish makes an offer of a new draft of seller's: the current draft,
// its content, its publication. A step that fails is retried from the
// current draft, which stays the same draft until it is published.
func (l *topologyLoad) publish(ctx context.Context, seller string) (string, bool) {
	s, b, err := l.call(ctx, "POST", "/v1/drafts/current", fmt.Sprintf(`{"user":%q,"category":"cars"}`, seller))
	var d offerAnswer
	if !l.record("draft", s, err, 200, 201) || json.Unmarshal(b, &d) != nil || d.ID == "" {
		return "", false
	}
	s, _, err = l.call(ctx, "PUT", "/v1/drafts/"+d.ID, fmt.Sprintf(`{"user":%q,"offer":{"category":"cars","title":"new car","price":1,"currency":"RUB"}}`, seller))
	if !l.record("draft save", s, err, 200) {
		return "", false
	}
	s, b, err = l.call(ctx, "POST", "/v1/drafts/"+d.ID+"/publish", fmt.Sprintf(`{"user":%q}`, seller))
	var a offerAnswer
	if !l.record("publish", s, err, 200, 201) || json.Unmarshal(b, &a) != nil || a.Offer.ID == "" {
		return "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if from, ok := l.drafts[a.Offer.ID]; ok && from != d.ID {
		l.t.Errorf("offer id %s given twice: published from draft %s and from draft %s", a.Offer.ID, from, d.ID)
	}
	if _, ok := l.drafts[a.Offer.ID]; !ok {
		l.sellers[seller]++
	}
	l.drafts[a.Offer.ID] = d.ID
	l.offers[a.Offer.ID] = max(l.offers[a.Offer.ID], a.Version)
	return a.Offer.ID, true
}

// feedSeller uploads the load's feeds: each task the same feedItems
// external ids, so the seller has that many offers, all active, whatever
// task was loaded last.
const (
	feedSeller = "feed-seller"
	feedItems  = 5
)

// feeds uploads a feed task, then ends it, one after another.
func (l *topologyLoad) feeds(ctx context.Context) {
	for task := int64(1); ctx.Err() == nil; task++ {
		var body strings.Builder
		for i := range feedItems {
			fmt.Fprintf(&body, `{"external_id":"vin-%d","offer":{"category":"cars","title":"feed car %d","price":%d,"currency":"RUB"}}`+"\n", i, i, task)
		}
		path := fmt.Sprintf("/v1/sellers/%s/feeds/%d", feedSeller, task)
		s, _, err := l.call(ctx, "POST", path, body.String())
		if ctx.Err() != nil || !l.record("feed upload", s, err, 202) {
			time.Sleep(time.Second)
			continue
		}
		s, _, err = l.call(ctx, "POST", path+"/finish", fmt.Sprintf(`{"items":%d}`, feedItems))
		if ctx.Err() != nil {
			return
		}
		if l.record("feed end", s, err, 202) {
			l.mu.Lock()
			l.tasks = append(l.tasks, task)
			l.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// numerator shows the numerator generation after generation and seals
// each, waiting for its state before the next, one a second at most.
func (l *topologyLoad) numerator(ctx context.Context) {
	cl, err := l.c.brokers.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		l.t.Error(err)
		return
	}
	defer cl.Close()
	for g := int64(1); ctx.Err() == nil; g++ {
		// The broker is not faulted: a generation is sent whole.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		err := numeratortest.SendGeneration(pctx, cl, g)
		cancel()
		if err != nil {
			l.t.Errorf("numerator load: generation %d: %v", g, err)
			return
		}
		l.mu.Lock()
		l.marked = g
		l.mu.Unlock()
		if numeratortest.WaitSealed(ctx, l.c.brokers, g) != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// checkNumerator checks that every generation sent was sealed, with one
// state per generation, and gave the ids and the table of a numerator
// never interrupted.
func (l *topologyLoad) checkNumerator(t *testing.T, partitions int32) {
	l.mu.Lock()
	marked := l.marked
	l.mu.Unlock()
	if marked == 0 {
		t.Fatal("no numerator generation was sent")
	}
	brokers := l.c.brokers
	if err := numeratortest.WaitSealed(testkit.Context(t, 2*time.Minute), brokers, marked); err != nil {
		t.Fatal(err)
	}
	states := map[int64]string{}
	for _, r := range testkit.ReadAll(t, brokers, topics.NumeratorStates) {
		var st schemas.NumeratorState
		if err := schemas.NumeratorStates.Decode(r.Value, &st); err != nil {
			t.Fatal(err)
		}
		shards, _ := json.Marshal(st.Shards)
		if was, ok := states[st.Generation]; ok && was != string(shards) {
			t.Errorf("generation %d has two different states (the second by %s, ticket %d)", st.Generation, st.Holder, st.Ticket)
		}
		states[st.Generation] = string(shards)
	}
	table := testkit.Table(t, brokers, topics.NumeratorTable)
	got := numeratortest.Assignments(t, brokers)
	want, wantTable := numeratortest.StraightNumerator(t, platform.DefaultConfig().Numerator, partitions, marked, len(table))
	if len(got) != len(want) {
		t.Errorf("the numerator gave %d ids under the faults, %d uninterrupted", len(got), len(want))
	}
	for k, a := range want {
		if got[k] != a {
			t.Errorf("numerator: %s is %v under the faults, %v uninterrupted", k, got[k], a)
		}
	}
	for k, v := range wantTable {
		if !bytes.Equal(table[k], v) {
			t.Errorf("numerator-table[%s] differs from an uninterrupted run's", k)
		}
	}
	t.Logf("topology: %d numerator generations sealed, %d states, %d ids as an uninterrupted run's", marked, len(states), len(got))
}

// reads reads offers by id through the API (which reads the serving
// cache).
func (l *topologyLoad) reads(ctx context.Context) {
	for ctx.Err() == nil {
		if l.pace.Wait(ctx) != nil {
			return
		}
		l.mu.Lock()
		var id string
		for k := range l.offers {
			id = k
			break
		}
		l.mu.Unlock()
		if id == "" {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		s, _, err := l.call(ctx, "GET", "/v1/offers/"+id, "")
		if ctx.Err() != nil {
			return
		}
		if !l.record("offer read", s, err, 200) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// rate is the successful writes per second over the whole seconds in
// [from, to).
func (l *topologyLoad) rate(from, to time.Time) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, secs := 0, 0
	for s := from.Unix(); s < to.Unix(); s++ {
		n += l.ok[s]
		secs++
	}
	if secs == 0 {
		return 0
	}
	return float64(n) / float64(secs)
}

// waitRate waits until the load runs (writes succeed in each of 3 seconds
// in a row).
func (l *topologyLoad) waitRate(t *testing.T, within time.Duration) {
	deadline := time.Now().Add(within)
	for {
		now := time.Now()
		if l.rate(now.Add(-3*time.Second), now) > 0 && l.rate(now.Add(-1*time.Second), now) > 0 {
			return
		}
		if now.After(deadline) {
			t.Fatalf("the load did not run in %v: %v", within, l.errorsSince(now.Add(-within)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *topologyLoad) errorsSince(from time.Time) map[string]int {
	return l.errorsIn(from, time.Now().Add(time.Hour))
}

func (l *topologyLoad) errorsIn(from, to time.Time) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, e := range l.errs {
		if !e.at.Before(from) && e.at.Before(to) {
			out[e.what]++
		}
	}
	return out
}

// searchAll pages through every document a search through API process p
// finds, by pk, at the version found.
func (l *topologyLoad) searchAll(ctx context.Context, p *pod) (map[string]int64, bool, error) {
	found := map[string]int64{}
	partial := false
	q := `{"filters":[{"field":"price","gte":0}],"limit":1000}`
	for {
		s, b, err := l.callPod(ctx, p, "POST", "/v1/clients/shop/search", q)
		if err != nil || s != 200 {
			return found, partial, fmt.Errorf("search: %d %s %v", s, b, err)
		}
		var r struct {
			Hits []struct {
				PK      string
				Version int64
			}
			Cursor  string
			Partial bool
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return found, partial, err
		}
		for _, h := range r.Hits {
			found[h.PK] = h.Version
		}
		partial = partial || r.Partial
		if r.Cursor == "" {
			return found, partial, nil
		}
		q = fmt.Sprintf(`{"filters":[{"field":"price","gte":0}],"limit":1000,"cursor":%q}`, r.Cursor)
	}
}

// check reads every acknowledged write through every API process, at
// its version or newer; finds every acknowledged document by a search;
// and the sellers' counters against a recount.
func (l *topologyLoad) check(t *testing.T, ctx context.Context) {
	l.mu.Lock()
	docs, offers, sellers := l.docs, l.offers, l.sellers
	l.mu.Unlock()
	if len(docs) == 0 || len(offers) == 0 {
		t.Fatalf("the load acknowledged %d documents and %d offers", len(docs), len(offers))
	}
	t.Logf("topology: checking %d documents, %d offers of %d sellers through %d API processes", len(docs), len(offers), len(sellers), len(l.c.podsOf("api")))
	for _, p := range l.c.podsOf("api") {
		for pk, v := range docs {
			s, b, err := l.callPod(ctx, p, "GET", fmt.Sprintf("/v1/clients/shop/documents/%s?min_version=%d", pk, v), "")
			var d struct{ Version int64 }
			if err != nil || s != 200 || json.Unmarshal(b, &d) != nil || d.Version < v {
				t.Errorf("%s: document %s acknowledged at version %d reads %d %s %v", p.name, pk, v, s, b, err)
			}
		}
		for id, v := range offers {
			s, b, err := l.callPod(ctx, p, "GET", fmt.Sprintf("/v1/offers/%s?min_version=%d", id, v), "")
			var a offerAnswer
			if err != nil || s != 200 || json.Unmarshal(b, &a) != nil || a.Version < v {
				t.Errorf("%s: offer %s acknowledged at version %d reads %d %s %v", p.name, id, v, s, b, err)
			}
		}
	}
	// Every acknowledged document is found by a search through every API
	// process, at its version or newer: the API fans out to the searcher's
	// members, which went through the faults too.
	for _, p := range l.c.podsOf("api") {
		var missing []string
		var last string
		deadline := time.Now().Add(2 * time.Minute)
		for {
			found, partial, err := l.searchAll(ctx, p)
			missing = missing[:0]
			for pk, v := range docs {
				if found[pk] < v {
					missing = append(missing, fmt.Sprintf("%s@%d (found %d)", pk, v, found[pk]))
				}
			}
			if err == nil && !partial && len(missing) == 0 {
				break
			}
			last = fmt.Sprintf("partial %v, err %v", partial, err)
			if time.Now().After(deadline) {
				t.Errorf("%s: a search does not find %d acknowledged documents (%s): %v", p.name, len(missing), last, missing[:min(len(missing), 10)])
				break
			}
			time.Sleep(time.Second)
		}
	}
	l.mu.Lock()
	l.current = map[string]int64{}
	l.mu.Unlock()
	for _, p := range l.c.podsOf("api") {
		for pk := range docs {
			_, b, _ := l.callPod(ctx, p, "GET", "/v1/clients/shop/documents/"+pk, "")
			var d struct{ Version int64 }
			if json.Unmarshal(b, &d) == nil {
				l.mu.Lock()
				l.current[pk] = max(l.current[pk], d.Version)
				l.mu.Unlock()
			}
		}
	}
	// Every feed task whose end was acknowledged is loaded whole.
	l.mu.Lock()
	tasks := slices.Clone(l.tasks)
	l.mu.Unlock()
	if len(tasks) == 0 {
		t.Errorf("no feed task was acknowledged")
	}
	for _, task := range tasks {
		var last string
		deadline := time.Now().Add(time.Minute)
		for {
			s, b, err := l.call(ctx, "GET", fmt.Sprintf("/v1/sellers/%s/feeds/%d", feedSeller, task), "")
			var st struct{ State string }
			if err == nil && s == 200 && json.Unmarshal(b, &st) == nil && st.State == "DONE" {
				break
			}
			last = fmt.Sprintf("%d %s %v", s, b, err)
			if time.Now().After(deadline) {
				t.Errorf("feed task %d, its end acknowledged, is not DONE: %s", task, last)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Every publication a client was answered is counted (one whose answer
	// was lost may be too: the recount of the tables, after the run, is
	// exact); the feed's seller has the feed's offers.
	sellers[feedSeller] = feedItems
	for seller, n := range sellers {
		var last string
		deadline := time.Now().Add(time.Minute)
		for {
			s, b, err := l.call(ctx, "GET", "/v1/sellers/"+seller+"/counters", "")
			var cnt struct{ Active int64 }
			if err == nil && s == 200 && json.Unmarshal(b, &cnt) == nil && (cnt.Active >= int64(n) && seller != feedSeller || cnt.Active == int64(n)) {
				break
			}
			last = fmt.Sprintf("%d %s %v", s, b, err)
			if time.Now().After(deadline) {
				t.Errorf("seller %s was answered %d publications, all active; its counters say %s", seller, n, last)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// checkSearchFeed checks that the search feed (saas.shop, the indexer's
// export) ends with the registry's records: each document's last change
// in it is the registry's version.
func (l *topologyLoad) checkSearchFeed(t *testing.T, brokers *streams.Cluster) {
	var last string
	deadline := time.Now().Add(time.Minute)
	for {
		feed := testkit.LastSaas(t, brokers, "shop")
		var behind []string
		for pk, v := range l.current {
			if got := feed["shop/"+pk].Version; got != v { // keyed client/pk
				behind = append(behind, fmt.Sprintf("%s: %d in the feed, %d in the registry", pk, got, v))
			}
		}
		if len(behind) == 0 {
			return
		}
		last = strings.Join(behind[:min(5, len(behind))], "; ")
		if time.Now().After(deadline) {
			t.Errorf("the search feed does not end with the registry's records (%d documents): %s", len(behind), last)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkCaches asks each data centre's cache servers, alone, for every
// offer: each data centre answers every key.
func (c *cluster) checkCaches(t *testing.T, l *topologyLoad) {
	l.mu.Lock()
	ids := make([]string, 0, len(l.offers))
	for id := range l.offers {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	sort.Strings(ids)
	dcs := map[string][]string{}
	for _, p := range c.podsOf("cache") {
		dc := workloadOf(c.m, p.workload).pod.Labels["dc"]
		dcs[dc] = append(dcs[dc], p.ports[9091])
	}
	if len(dcs) < 2 {
		t.Errorf("cache servers in %d data centres, want 2: %v", len(dcs), dcs)
	}
	for dc, hosts := range dcs {
		args := append([]string{"get", "--hosts", strings.Join(hosts, ","), "--table", "offers-table", "--timeout", "60s"}, ids...)
		cmd := exec.Command(c.bin, args...)
		cmd.Env = append(os.Environ(), "OFFERLOG_TOKEN="+l.token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("cache of %s: offerlog get: %v\n%s", dc, err, out)
			continue
		}
		answered := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			key, value, _ := strings.Cut(line, "\t")
			if value == "" || value == "null" {
				t.Errorf("cache of %s has no offer %s", dc, key)
				continue
			}
			answered++
		}
		if answered != len(ids) {
			t.Errorf("cache of %s answered %d of %d offers", dc, answered, len(ids))
		}
	}
}

// nemesis makes the faults of a topology run, one after another, and
// measures what each cost.
type nemesis struct {
	c       *cluster
	l       *topologyLoad
	rng     *rand.Rand
	reports []actionReport
	// watch is how long each fault's aftermath is watched for the writes'
	// rate to come back (a report, not an assertion): 2 minutes, or less
	// in the short form, which runs beside the rest of make test (there
	// the rate, judged against a baseline taken under another moment's
	// load, may never come back, and 2 minutes a fault made the test take
	// 10 minutes more). The groups' lag is waited for 2 minutes whatever
	// it is, so that faults do not pile up on groups still behind.
	watch time.Duration
}

type actionReport struct {
	action, target string
	took           time.Duration // the fault itself
	ready          time.Duration // its pods ready again, from its end
	recovered      time.Duration // the writes back at full rate, from its start (-1: not within watch)
	caughtUp       time.Duration // every group's lag under 10 s, from its start (-1: not in 2 min)
	behind         string        // the group furthest behind when last asked
	baseline       float64
	errors         map[string]int
}

func newNemesis(c *cluster, l *topologyLoad, rng *rand.Rand) *nemesis {
	return &nemesis{c: c, l: l, rng: rng, watch: 2 * time.Minute}
}

func (n *nemesis) pick(component string) *pod {
	var ps []*pod
	for _, p := range n.c.podsOf(component) {
		if p.component != "lag" {
			ps = append(ps, p)
		}
	}
	return ps[n.rng.IntN(len(ps))]
}

// act runs one fault: fault returns the pods to wait for. The report
// tells how long they took to be ready, when the last second of writes
// slower than 60 % of the 10 s before ended, and when every group's oldest
// unconsumed record was again less than 10 s old (the lag component's
// figures).
func (n *nemesis) act(ctx context.Context, action, target string, fault func() []*pod) {
	t := n.c.t
	start := time.Now()
	baseline := n.l.rate(start.Add(-10*time.Second), start)
	wait := fault()
	took := time.Since(start)
	r := actionReport{action: action, target: target, took: took, baseline: baseline, recovered: -1, caughtUp: -1}
	for _, p := range wait {
		r.ready = max(r.ready, n.c.waitReady(ctx, p, 3*time.Minute))
	}
	const steady = 5 * time.Second
	watched := time.Now().Add(n.watch)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && (r.recovered < 0 && time.Now().Before(watched) || r.caughtUp < 0); time.Sleep(time.Second) {
		now := time.Now()
		if r.caughtUp < 0 && now.Sub(start) > took {
			lag, which, ok := n.c.lagSeconds()
			if ok && lag < 10 {
				r.caughtUp = now.Sub(start)
			}
			r.behind = fmt.Sprintf("%s %.0f s", which, lag)
		}
		if r.recovered < 0 && now.Sub(start) >= took+steady && n.l.rate(now.Add(-steady), now) >= 0.6*baseline {
			r.recovered = 0
			for s := start.Unix(); s < now.Add(-steady).Unix(); s++ {
				if n.l.rate(time.Unix(s, 0), time.Unix(s+1, 0)) < 0.6*baseline {
					r.recovered = time.Unix(s+1, 0).Sub(start)
				}
			}
		}
	}
	r.errors = n.l.errorsIn(start, time.Now())
	if r.caughtUp < 0 {
		t.Logf("nemesis: %s %s: groups not caught up in 2 min: %s", action, target, r.behind)
	}
	t.Logf("nemesis: %s %s at %s: fault %v, ready %v after it; writes slow until %v, groups caught up at %v after its start (baseline %.0f/s); client errors %v",
		action, target, start.Format("15:04:05.000"), took.Round(time.Millisecond), r.ready.Round(time.Millisecond), r.recovered.Round(time.Millisecond),
		r.caughtUp.Round(time.Millisecond), baseline, r.errors)
	n.reports = append(n.reports, r)
}

// killBroker kill -9s the broker, under the load, and starts it again on
// its data: every pod loses its connections, its groups' members and its
// in-flight requests at once.
func (n *nemesis) killBroker(ctx context.Context) {
	n.act(ctx, "kill -9", "broker", func() []*pod {
		n.c.broker.stop(syscall.SIGKILL)
		n.c.broker.start(n.c.t, n.c.bin)
		return n.c.podsOf("")
	})
}

// killPod kill -9s a pod of component (any if ""), which the kubelet
// restarts at once in the same pod (its name and emptyDirs kept).
func (n *nemesis) killPod(ctx context.Context, component string) {
	p := n.pick(component)
	n.act(ctx, "kill -9", p.name, func() []*pod {
		n.c.stop(p, syscall.SIGKILL)
		n.c.start(p)
		return []*pod{p}
	})
}

// stopPod SIGSTOPs a pod of component for d (past its sessions: 10 s),
// then lets it go on.
func (n *nemesis) stopPod(ctx context.Context, component string, d time.Duration) {
	p := n.pick(component)
	n.act(ctx, "SIGSTOP "+d.String(), p.name, func() []*pod {
		p.mu.Lock()
		p.stopped = true
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		p.mu.Unlock()
		time.Sleep(d)
		p.mu.Lock()
		p.stopped = false
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.mu.Unlock()
		return []*pod{p}
	})
}

// isolate takes a pod's host off the network for d, then heals it.
func (n *nemesis) isolate(ctx context.Context, component string, d time.Duration) {
	p := n.pick(component)
	n.act(ctx, "link down "+d.String(), p.name, func() []*pod {
		if err := n.c.net.link(p.ns, false); err != nil {
			n.c.t.Fatal(err)
		}
		time.Sleep(d)
		if err := n.c.net.link(p.ns, true); err != nil {
			n.c.t.Fatal(err)
		}
		return []*pod{p}
	})
}

// roll replaces a Deployment's pods one at a time as its rolling update
// does (maxSurge 1, maxUnavailable 0): a new pod, ready, then an old one
// stopped (SIGTERM).
func (n *nemesis) roll(ctx context.Context, deployment string) {
	w := workloadOf(n.c.m, deployment)
	n.act(ctx, "rolling restart", deployment, func() []*pod {
		var made []*pod
		for _, old := range n.c.podsOf(w.pod.Labels["component"]) {
			if old.workload != deployment {
				continue
			}
			p := n.c.addPod(n.c.t, w, 0)
			n.c.startAll(ctx, []*pod{p})
			n.c.stop(old, syscall.SIGTERM)
			n.c.remove(old)
			made = append(made, p)
		}
		return made
	})
}

// scale makes a workload's replicas to: new pods started, or the newest
// stopped (SIGTERM).
func (n *nemesis) scale(ctx context.Context, deployment string, to int) {
	w := workloadOf(n.c.m, deployment)
	var have []*pod
	for _, p := range n.c.podsOf(w.pod.Labels["component"]) {
		if p.workload == deployment {
			have = append(have, p)
		}
	}
	n.act(ctx, fmt.Sprintf("scale %d → %d", len(have), to), deployment, func() []*pod {
		var made []*pod
		for range to - len(have) {
			made = append(made, n.c.addPod(n.c.t, w, 0))
		}
		if len(made) > 0 {
			n.c.startAll(ctx, made)
		}
		for i := len(have) - 1; i >= to; i-- {
			n.c.stop(have[i], syscall.SIGTERM)
			n.c.remove(have[i])
		}
		return made
	})
}

// remove forgets a pod stopped for good.
func (c *cluster) remove(p *pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = slices.DeleteFunc(c.pods, func(q *pod) bool { return q == p })
}

// report logs the figures of every fault, as docs/RELIABILITY.md gives
// them.
func (n *nemesis) report(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | target | fault took | ready after | writes below 60 %% until | groups caught up at | client errors |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	within := func(d, bound time.Duration) string {
		if d < 0 {
			return "not in " + bound.String()
		}
		return d.Round(100 * time.Millisecond).String()
	}
	for _, r := range n.reports {
		var errs []string
		for _, k := range slices.Sorted(maps.Keys(r.errors)) {
			errs = append(errs, fmt.Sprintf("%s ×%d", k, r.errors[k]))
		}
		fmt.Fprintf(&b, "| %s | %s | %v | %v | %s | %s | %s |\n", r.action, r.target, r.took.Round(100*time.Millisecond),
			r.ready.Round(100*time.Millisecond), within(r.recovered, n.watch), within(r.caughtUp, 2*time.Minute), strings.Join(errs, "; "))
	}
	t.Logf("topology report (static membership %v):\n%s", n.c.static, b.String())
}

// lagSeconds is the largest age of a group's oldest unconsumed record, as
// the lag component's pod reports it, and that group and topic; the YDB
// sink's groups, which the topology does not run, left out.
func (c *cluster) lagSeconds() (float64, string, bool) {
	lag := c.podsOf("lag")
	if len(lag) == 0 {
		return 0, "", false
	}
	resp, err := topologyHTTP.Get("http://" + lag[0].http + "/metrics")
	if err != nil {
		return 0, "", false
	}
	defer resp.Body.Close()
	worst, which, seen := 0.0, "", false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "offerlog_kafka_consumer_group_topic_lag_seconds{")
		if !ok || strings.HasPrefix(rest, `group_id="sink-ydb-`) {
			continue
		}
		labels, v, _ := strings.Cut(rest, "} ")
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			seen = true
			if f > worst {
				worst, which = f, labels
			}
		}
	}
	return worst, which, seen
}
