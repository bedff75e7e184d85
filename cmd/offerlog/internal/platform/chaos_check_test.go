package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/cabinet/cabinettest"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/numeratortest"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// chaosTables are the tables a replay rebuilds, with the search feed the
// indexer replays.
var chaosTables = []string{string(topics.RegistryTable), topics.SaasTopic("chaos"), string(topics.NumeratorTable),
	string(topics.OffersTable), string(topics.DraftsTable), string(topics.CabinetTable), string(topics.CabinetPresets)}

// TestKill9AnywhereUnderLoad: after kill -9 at random moments under load,
// every acknowledged write is visible at its acknowledged version or newer,
// no offer id is handed out for two drafts, counters equal a recount, the
// numerator gives the ids of a run never interrupted, and a replay of every
// group rebuilds its table byte for byte.
func TestKill9AnywhereUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("kills platform processes")
	}
	kills := int(chaosInt(t, "OFFERLOG_CHAOS_KILLS", 3))
	seed := chaosInt(t, "OFFERLOG_CHAOS_SEED", uint64(time.Now().UnixNano()))
	t.Logf("OFFERLOG_CHAOS_SEED=%d OFFERLOG_CHAOS_KILLS=%d", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 1))
	brokers := testkit.Broker(t, "").Addrs()
	p := &chaosPlatform{t: t, child: chaosChild{Brokers: brokers, DataDir: t.TempDir(), HTTPAddr: freeAddr(t),
		ZooKeeper: testkit.ZooKeeper(t), Stage: serveStage(t, chaosStage{})}}
	p.start()
	t.Cleanup(p.showLog)
	p.waitReady()

	v := &violations{}
	docs := &docLoad{p: p, v: v, acked: map[string]int64{}}
	gost := &gostLoad{p: p, v: v, offers: map[string]told{}, byDraft: map[string]string{}, ofOffer: map[string]string{}}
	num := &numeratorLoad{brokers: brokers, v: v}
	stop := runLoads(t,
		func(ctx context.Context) { docs.run(ctx, rand.New(rand.NewPCG(seed, 2))) },
		func(ctx context.Context) { gost.run(ctx, rand.New(rand.NewPCG(seed, 3))) },
		num.run)

	for range kills {
		p.killAtRandom(rng)
	}
	// After the last restart every load is answered again.
	progress := func() [3]int64 {
		docs.mu.Lock()
		defer docs.mu.Unlock()
		gost.mu.Lock()
		defer gost.mu.Unlock()
		num.mu.Lock()
		defer num.mu.Unlock()
		return [3]int64{int64(docs.answered), int64(gost.answers), num.sealed}
	}
	before := progress()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		now := progress()
		if now[0] > before[0]+5 && now[1] > before[1]+5 && now[2] > before[2] {
			break
		}
		if time.Now().After(deadline) {
			v.check(t)
			logLag(t, brokers)
			t.Fatalf("answers (documents, offers, generations) after the last restart: %v, before it %v", now, before)
		}
	}
	stop()
	v.check(t)
	p.waitReady()

	c := &chaosCheck{t: t, p: p, brokers: brokers}
	num.mu.Lock()
	marked := num.marked
	num.mu.Unlock()
	if err := numeratortest.WaitSealed(testkit.Context(t, 3*time.Minute), brokers, marked); err != nil {
		t.Fatal(err)
	}
	c.scheduled()
	settleAll(t, brokers)
	c.documents(docs)
	c.offers(gost)
	c.feedStatuses()
	live := map[string]map[string][]byte{}
	for _, tb := range chaosTables {
		live[tb] = testkit.Table(t, brokers, tb)
	}
	c.recount(live)
	c.reads(live[string(topics.OffersTable)])

	// The tables are what their logs imply: a replay of every group, the
	// platform stopped, rebuilds them byte for byte.
	p.kill()
	c.viewsAreTheLog()
	c.membersGone()
	c.replay()
	for _, tb := range chaosTables {
		c.records += sameTable(t, "replay", tb, live[tb], testkit.Table(t, brokers, tb))
	}
	c.straightNumerator(marked, live[string(topics.NumeratorTable)])

	if !t.Failed() {
		t.Logf("chaos: %d kills (%d while starting), %d answers checked (%d documents, %d offers, %d publications, %d feed items, %d generations sealed), %d records compared, mismatches: 0",
			p.kills, p.starting, c.answers, len(docs.acked), len(gost.offers), len(gost.byDraft), gost.feed, marked, c.records)
	}
}

// chaosCheck checks the settled platform against what its clients were
// told and what its logs imply.
type chaosCheck struct {
	t       *testing.T
	p       *chaosPlatform
	brokers []string
	// replayWithin bounds the replays (default 5 minutes; a soak's log
	// takes longer).
	replayWithin time.Duration
	// Figures.
	answers, records int
}

// scheduled waits until the stage has marked every offer and holds none
// in its queue: nothing was lost, nothing is Queued forever.
func (c *chaosCheck) scheduled() {
	c.t.Helper()
	testkit.Eventually(c.t, 3*time.Minute, "the stage's result on every offer, none left queued", func() bool {
		for _, v := range testkit.Table(c.t, c.brokers, topics.OffersTable) {
			var rec schemas.OfferRecord
			if err := schemas.OfferRecords.Decode(v, &rec); err != nil {
				c.t.Fatal(err)
			}
			if st, _ := offers.StageOf(&rec, chaosStageName); rec.Offer.Attributes.Get("a") != "done" || st.Queued {
				return false
			}
		}
		return true
	})
}

// documents checks every accepted version against the registry's table and
// the search feed against the registry.
func (c *chaosCheck) documents(l *docLoad) {
	c.t.Helper()
	current := map[string]int64{}
	for _, v := range testkit.Table(c.t, c.brokers, topics.RegistryTable) {
		var rec schemas.RegistryRecord
		if err := schemas.RegistryRecords.Decode(v, &rec); err != nil {
			c.t.Fatal(err)
		}
		if rec.Client == "chaos" {
			current[rec.PK] = rec.Version
		}
	}
	for pk, v := range l.acked {
		c.answers++
		if current[pk] < v {
			c.t.Errorf("document %s: version %d accepted, the registry has %d", pk, v, current[pk])
		}
	}
	saas := map[string]schemas.SaasDocument{}
	for _, d := range testkit.LastSaas(c.t, c.brokers, "chaos") {
		saas[d.PK] = d
	}
	for pk, v := range current {
		if saas[pk].Version != v {
			c.t.Errorf("document %s: version %d in the registry, %d in the search feed", pk, v, saas[pk].Version)
		}
	}
}

// offers checks every offer's version against the newest its clients were
// told, and the feed's offers against the last task acknowledged.
func (c *chaosCheck) offers(l *gostLoad) {
	c.t.Helper()
	ctx := testkit.Context(c.t, time.Minute)
	for id, told := range l.offers {
		c.answers++
		var got offerapi.OfferVersion
		c.get(ctx, "/v1/offers/"+id, &got)
		if got.Version < told.version || got.Version == told.version && got.Offer.Title != told.title {
			c.t.Errorf("offer %s: told version %d %q, now %d %q", id, told.version, told.title, got.Version, got.Offer.Title)
		}
	}
	have := map[string]bool{}
	for token := ""; ; {
		var page offerapi.Page
		c.get(ctx, "/v1/sellers/feeder/offers?preset=all&limit=50&page_token="+token, &page)
		for _, o := range page.Offers {
			have[o.Offer.ExternalID] = true
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	for i := 1; i <= l.feed; i++ {
		c.answers++
		if !have[fmt.Sprint("vin-", i)] {
			c.t.Errorf("feed item vin-%d of an acknowledged task is not an offer", i)
		}
	}
}

// feedStatuses checks every feed task's status against feeds.ingest: it
// counted each item record of the task once, whatever the kills, each in
// one outcome, and a task whose end marker is in the log is finished.
func (c *chaosCheck) feedStatuses() {
	c.t.Helper()
	items, ended := map[int64]int64{}, map[int64]bool{}
	for _, r := range testkit.ReadAll(c.t, c.brokers, topics.FeedsIngest) {
		var it schemas.FeedItem
		if schemas.FeedItems.Decode(r.Value, &it) != nil || it.SellerID != "feeder" {
			continue
		}
		if it.End {
			ended[it.TaskID] = true
		} else {
			items[it.TaskID]++
		}
	}
	ctx := testkit.Context(c.t, time.Minute)
	for task, n := range items {
		c.answers++
		var st offerapi.FeedTaskStatus
		c.get(ctx, fmt.Sprintf("/v1/sellers/feeder/feeds/%d", task), &st)
		switch {
		case st.Received != n:
			c.t.Errorf("feed task %d: status counts %d items received, feeds.ingest holds %d: %+v", task, st.Received, n, st)
		case st.Applied+st.Skipped+st.Refused != st.Received:
			c.t.Errorf("feed task %d: %d applied + %d skipped + %d refused != %d received", task, st.Applied, st.Skipped, st.Refused, st.Received)
		case ended[task] && st.State == schemas.FeedLoading:
			c.t.Errorf("feed task %d: its end marker is in the log, its status is %s", task, st.State)
		}
	}
}

// reads checks what the API reads against the log, once its views have
// caught up: every offer of offers-table (table) reads at its version,
// deleted ones are not found, and every seller's counters and preset
// lists are a recount of its offers.
func (c *chaosCheck) reads(table map[string][]byte) {
	c.t.Helper()
	var recs []*schemas.OfferRecord
	for _, raw := range table {
		var rec schemas.OfferRecord
		if err := schemas.OfferRecords.Decode(raw, &rec); err != nil {
			c.t.Fatal(err)
		}
		recs = append(recs, &rec)
	}
	recount := cabinet.Recount(recs)
	var wrong []string
	agree := func() bool {
		wrong = wrong[:0]
		ctx := testkit.Context(c.t, time.Minute)
		for _, rec := range recs {
			s, b, err := request(ctx, "GET", c.p.url("/v1/offers/"+rec.Offer.ID), "")
			var got offerapi.OfferVersion
			switch {
			case err != nil || s >= 500:
				wrong = append(wrong, fmt.Sprintf("offer %s: GET %d %s %v", rec.Offer.ID, s, b, err))
			case rec.Offer.Status == schemas.OfferDeleted:
				if s != http.StatusNotFound {
					wrong = append(wrong, fmt.Sprintf("offer %s deleted at version %d in the log: GET %d %s", rec.Offer.ID, rec.Version, s, b))
				}
			case s != http.StatusOK || json.Unmarshal(b, &got) != nil || got.Version != rec.Version:
				wrong = append(wrong, fmt.Sprintf("offer %s at version %d in the log: GET %d %s", rec.Offer.ID, rec.Version, s, b))
			}
		}
		for seller, want := range recount {
			var got schemas.SellerCabinet
			s, b, err := request(ctx, "GET", c.p.url("/v1/sellers/"+seller+"/counters"), "")
			if err != nil || s != http.StatusOK || json.Unmarshal(b, &got) != nil {
				wrong = append(wrong, fmt.Sprintf("counters of %s: %d %s %v", seller, s, b, err))
				continue
			}
			if ok, diff := cabinet.Equal(&got, want); !ok {
				wrong = append(wrong, "counters: "+diff)
			}
			n := got.Presets.Get(offers.PresetAll)
			listed := 0
			for token := ""; ; {
				var page offerapi.Page
				s, b, err := request(ctx, "GET", c.p.url("/v1/sellers/"+seller+"/offers?preset=all&limit=100&page_token="+token), "")
				if err != nil || s != http.StatusOK || json.Unmarshal(b, &page) != nil {
					wrong = append(wrong, fmt.Sprintf("offers of %s: %d %s %v", seller, s, b, err))
					break
				}
				listed += len(page.Offers)
				if token = page.NextPageToken; token == "" {
					break
				}
			}
			if int64(listed) != n {
				wrong = append(wrong, fmt.Sprintf("seller %s: %d offers listed in preset all, its counters say %d", seller, listed, n))
			}
		}
		return len(wrong) == 0
	}
	// The views follow the log: they agree once they have read it.
	for deadline := time.Now().Add(time.Minute); !agree(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, w := range wrong[:min(len(wrong), 30)] {
				c.t.Error(w)
			}
			c.t.Fatalf("%d reads disagree with the log a minute after every group committed its input", len(wrong))
		}
	}
	c.answers += len(recs) + len(recount)
}

// viewsAreTheLog checks every view store the killed platform left against
// its topic (testkit.SameAsTheLog): a view holds its topic up to its
// offsets, whatever the kills.
func (c *chaosCheck) viewsAreTheLog() {
	c.t.Helper()
	dirs, err := filepath.Glob(filepath.Join(c.p.child.DataDir, "state", "view", "*", "table"))
	if err != nil || len(dirs) == 0 {
		c.t.Fatalf("no view stores (%v)", err)
	}
	logs := map[string][]*kgo.Record{}
	for _, dir := range dirs {
		vs := testkit.ReadViewStore(c.t, dir)
		if vs.Topic == "" {
			c.t.Errorf("view store %s does not name its topic", dir)
			continue
		}
		if logs[vs.Topic] == nil {
			logs[vs.Topic] = testkit.ReadAll(c.t, c.brokers, vs.Topic)
		}
		c.records += testkit.SameAsTheLog(c.t, filepath.Base(filepath.Dir(dir)), vs, logs[vs.Topic])
	}
}

func (c *chaosCheck) get(ctx context.Context, path string, out any) {
	c.t.Helper()
	s, b, err := request(ctx, "GET", c.p.url(path), "")
	if err != nil || s != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s %v", path, s, b, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
}

// recount checks the cabinet against a count from scratch over the offers.
func (c *chaosCheck) recount(live map[string]map[string][]byte) {
	c.t.Helper()
	c.records += cabinettest.Recount(c.t, live[string(topics.OffersTable)], live[string(topics.CabinetTable)])
}

// membersGone waits until the killed process's members of every group
// have expired: a replay must run alone.
func (c *chaosCheck) membersGone() {
	c.t.Helper()
	testkit.WaitGroupsEmpty(c.t, c.brokers, string(registry.Group), indexer.Group, string(numerator.Group), string(offers.Group),
		string(drafts.Group), string(cabinet.Group))
}

// replay replays every group the way `offerlog replay` does, each producer
// before its consumers.
func (c *chaosCheck) replay() {
	c.t.Helper()
	within := c.replayWithin
	if within == 0 {
		within = 5 * time.Minute
	}
	ctx := testkit.Context(c.t, within)
	cfg := c.p.child.config()
	log := testkit.Logger()
	scfg := table.Config{Cluster: testkit.Cluster(c.t, c.brokers), StateDir: c.t.TempDir(), Replication: 1, Logger: log}
	epochs := registry.NewCatalogue(cfg.EpochGrace)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = epochs.Follow(fctx, scfg.Cluster, log) }()
	defer func() { cancel(); <-done }()
	ncfg := cfg.Numerator
	ncfg.Streams, ncfg.Logger = scfg, log
	for name, replay := range map[string]func() error{
		"registry": func() error {
			return registry.Replay(ctx, registry.Config{Streams: scfg, Rules: cfg.Rules, Epochs: epochs, Logger: log}, cfg.Partitions, cfg.Replication)
		},
		"numerator": func() error { return numerator.Replay(ctx, ncfg, cfg.Partitions, cfg.Replication) },
	} {
		if err := replay(); err != nil {
			c.t.Fatalf("replay %s: %v", name, err)
		}
	}
	for name, replay := range []func() error{
		func() error {
			return indexer.Replay(ctx, indexer.Config{Cluster: scfg.Cluster, Partitions: cfg.Partitions, Replication: cfg.Replication, Logger: log})
		},
		func() error {
			return offers.Replay(ctx, offers.Config{Streams: scfg, Stages: cfg.Stages.Names()}, cfg.Partitions, cfg.Replication)
		},
		func() error { return drafts.Replay(ctx, drafts.Config{Streams: scfg}, cfg.Partitions, cfg.Replication) },
		func() error {
			return cabinet.Replay(ctx, cabinet.Config{Streams: scfg}, cfg.Partitions, cfg.Replication)
		},
	} {
		if err := replay(); err != nil {
			c.t.Fatalf("replay %d: %v", name, err)
		}
	}
}

// straightNumerator runs a numerator never interrupted over generations
// 1..last on a broker of its own: its table and ids must be the killed
// one's.
func (c *chaosCheck) straightNumerator(last int64, table map[string][]byte) {
	c.t.Helper()
	cfg := c.p.child.config()
	straight, straightTable := numeratortest.StraightNumerator(c.t, cfg.Numerator, cfg.Partitions, last, len(table))
	killed := numeratortest.Assignments(c.t, c.brokers)
	if len(straight) != len(killed) {
		c.t.Errorf("%d ids given after the kills, %d without", len(killed), len(straight))
	}
	for k, a := range straight {
		c.records++
		if killed[k] != a {
			c.t.Errorf("%s: %v after the kills, %v without", k, killed[k], a)
		}
	}
	c.records += sameTable(c.t, "straight run", string(topics.NumeratorTable), table, straightTable)
}

// logLag logs every group's state and lag, to show which one is stuck.
func logLag(t *testing.T, brokers []string) {
	cl, err := testkit.Cluster(t, brokers).Client()
	if err != nil {
		t.Log(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Logf("list groups: %v", err)
		return
	}
	lags, err := adm.Lag(ctx, groups.Groups()...)
	if err != nil {
		t.Logf("lag: %v", err)
		return
	}
	var b strings.Builder
	lags.Each(func(l kadm.DescribedGroupLag) {
		fmt.Fprintf(&b, "%s state %s members %d lag %d", l.Group, l.State, len(l.Members), l.Lag.Total())
		if l.Error() != nil {
			fmt.Fprintf(&b, " (%v)", l.Error())
		}
		b.WriteByte('\n')
	})
	t.Logf("groups after the last restart:\n%s", b.String())
}
