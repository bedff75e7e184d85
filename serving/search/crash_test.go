package search_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/topics"
)

// TestSearcherProcess is not a test of its own: the kill test runs the
// test binary with it selected, to have a searcher it can kill.
func TestSearcherProcess(t *testing.T) {
	brokers := os.Getenv("OFFERLOG_TEST_SEARCHER_BROKERS")
	if brokers == "" {
		t.Skip("runs only as the process TestSearcherKilledEndsAsTheLogSays kills")
	}
	s := search.New(search.Config{Cluster: testkit.Cluster(t, strings.Split(brokers, ",")), Dir: os.Getenv("OFFERLOG_TEST_SEARCHER_DIR"),
		Epochs: epochs(), Logger: testkit.Logger()})
	err := s.Run(context.Background())
	t.Fatalf("the searcher returned before it was killed: %v", err)
}

// TestSearcherKilledEndsAsTheLogSays kills a searcher (SIGKILL) three
// times while it indexes a feed of new versions, deletes and tombstones
// (as the indexer writes it: a key's versions grow), then starts one on
// the same disk: every document the log leaves live is found at the
// version the log implies, and no other. (Versions out of order are
// TestVersionsDeletesAndTTL's: on a compacted feed the log keeps only a
// key's last record, so it cannot be the judge of them.)
func TestSearcherKilledEndsAsTheLogSays(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a searcher process")
	}
	f := &fixture{t: t, dir: t.TempDir()}
	f.brokers = testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, f.brokers, append(topics.Catalogue(2), topics.ForClient("shop", 2)...))
	f.prod = testkit.Client(t, f.brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	rng := rand.New(rand.NewPCG(20261129, 1))
	versions := map[string]int64{}
	produce := func(n int) {
		for range n {
			pk := fmt.Sprint(rng.IntN(300))
			versions[pk]++
			it := item{pk: pk, title: "lamp " + pk, price: int64(rng.IntN(1000)), version: versions[pk]}
			switch r := rng.IntN(20); {
			case r == 0:
				f.prod.Produce(context.Background(), &kgo.Record{Topic: topics.SaasTopic("shop"), Key: []byte("shop/" + pk)}, nil)
				continue
			case r == 1:
				it.delete = true
			}
			data, err := schemas.SaasDocuments.Encode(it.doc())
			if err != nil {
				t.Fatal(err)
			}
			f.prod.Produce(context.Background(), &kgo.Record{Topic: topics.SaasTopic("shop"), Key: []byte("shop/" + pk), Value: data}, nil)
		}
		if err := f.prod.Flush(testkit.Context(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	adm := testkit.Admin(t, f.brokers)
	committed := func() int64 {
		offs, err := adm.FetchOffsets(context.Background(), search.Group)
		if err != nil {
			return 0
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		return n
	}
	produce(3000)
	for round := range 3 {
		before := committed()
		kill := testkit.Child(t, "TestSearcherProcess", "OFFERLOG_TEST_SEARCHER_BROKERS="+strings.Join(f.brokers, ","),
			"OFFERLOG_TEST_SEARCHER_DIR="+f.dir)
		testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: the searcher at work", round), func() bool { return committed() > before })
		kill()
		produce(2000)
	}
	f.start()
	f.settle()

	// What the log implies: each pk's state, by the version rule, in the
	// order of its partition.
	type state struct {
		version int64
		live    bool
	}
	want := map[string]state{}
	for _, r := range testkit.ReadAll(t, f.brokers, topics.SaasTopic("shop")) {
		pk := strings.TrimPrefix(string(r.Key), "shop/")
		cur, seen := want[pk]
		if r.Value == nil {
			want[pk] = state{cur.version, false}
			continue
		}
		var d schemas.SaasDocument
		if err := schemas.SaasDocuments.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Action == schemas.ActionDelete && (!seen || d.Version >= cur.version):
			want[pk] = state{d.Version, false}
		case d.Action != schemas.ActionDelete && (!seen || d.Version > cur.version):
			want[pk] = state{d.Version, true}
		}
	}
	got := map[string]int64{}
	q := search.Query{Filters: []search.Filter{{Field: "price", Gte: f64(0)}}, Limit: 100}
	for {
		r := f.search(q)
		for _, h := range r.Hits {
			got[h.PK] = h.Version
		}
		if r.Cursor == "" {
			break
		}
		q.Cursor = r.Cursor
	}
	live := 0
	for pk, w := range want {
		v, found := got[pk]
		switch {
		case w.live && !found:
			t.Errorf("%s: version %d not found", pk, w.version)
		case w.live && v != w.version:
			t.Errorf("%s: version %d found, the log says %d", pk, v, w.version)
		case !w.live && found:
			t.Errorf("%s: found at version %d, removed by the log", pk, v)
		}
		if w.live {
			live++
		}
	}
	if len(got) != live || live < 100 {
		t.Errorf("%d documents found, %d live in the log", len(got), live)
	}
}
