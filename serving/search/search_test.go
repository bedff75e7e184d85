package search_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/topics"
)

// epochs are shop's: a title, a price, a score, a flag, tags and a
// 3-dimension embedding.
func epochs() *registry.Catalogue {
	c := registry.NewCatalogue(time.Minute)
	c.Put(&schemas.EpochSchema{Client: "shop", Epoch: 1, RegisteredAt: time.Now().Add(-time.Hour),
		Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString, Required: true}, {Name: "price", Type: schemas.TypeInt64},
			{Name: "score", Type: schemas.TypeDouble}, {Name: "new", Type: schemas.TypeBool}, {Name: "tags", Type: schemas.TypeStringList}},
		Embeddings: []schemas.EmbeddingSpec{{Name: "vec", Dimension: 3}}})
	// lang's first epoch names analyzers; its second reads title in
	// Russian and makes size a number.
	c.Put(&schemas.EpochSchema{Client: "lang", Epoch: 1, RegisteredAt: time.Now().Add(-time.Hour), Analyzer: schemas.AnalyzerRussian,
		Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString, Analyzer: schemas.AnalyzerEnglish}, {Name: "body", Type: schemas.TypeString},
			{Name: "note", Type: schemas.TypeString, Analyzer: schemas.AnalyzerStandard}, {Name: "code", Type: schemas.TypeString},
			{Name: "size", Type: schemas.TypeString}}})
	c.Put(&schemas.EpochSchema{Client: "lang", Epoch: 2, RegisteredAt: time.Now().Add(-time.Minute),
		Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString, Analyzer: schemas.AnalyzerRussian}, {Name: "size", Type: schemas.TypeInt64}}})
	return c
}

type item struct {
	pk, title string
	price     int64
	tags      []string
	vec       []float32
	version   int64
	delete    bool
	expires   *time.Time
}

func (it item) doc() *schemas.SaasDocument {
	title, price, isNew := it.title, it.price, it.price < 100
	d := &schemas.SaasDocument{PK: it.pk, Action: schemas.ActionUpsert, Epoch: 1, Version: max(it.version, 1),
		Timestamp: time.Now().UTC().Truncate(time.Millisecond), ExpiresAt: it.expires,
		Fields: []schemas.Field{{Name: "title", String: &title}, {Name: "price", Int64: &price}, {Name: "new", Bool: &isNew},
			{Name: "tags", StringList: it.tags}}}
	if it.vec != nil {
		d.Embeddings = []schemas.Embedding{{Name: "vec", Vector: it.vec}}
	}
	if it.delete {
		d.Action, d.Fields = schemas.ActionDelete, nil
	}
	return d
}

// corpus is the small corpus with known answers.
var corpus = []item{
	{pk: "1", title: "red bicycle", price: 300, tags: []string{"bike", "red"}, vec: []float32{1, 0, 0}},
	{pk: "2", title: "blue bicycle", price: 500, tags: []string{"bike"}, vec: []float32{0.9, 0.1, 0}},
	{pk: "3", title: "red car", price: 9000, tags: []string{"car"}, vec: []float32{0, 1, 0}},
	{pk: "4", title: "bicycle bell", price: 20, tags: []string{"bike", "parts"}, vec: []float32{0.5, 0.5, 0}},
	{pk: "5", title: "green scooter", price: 700, tags: []string{"scooter"}, vec: []float32{0, 0, 1}},
}

type fixture struct {
	t       *testing.T
	brokers []string
	prod    *kgo.Client
	dir     string
	s       *search.Searcher
	stop    func()
}

func newFixture(t *testing.T) *fixture {
	b := testkit.Broker(t, "")
	f := &fixture{t: t, brokers: b.Addrs(), dir: t.TempDir()}
	testkit.EnsureTopics(t, f.brokers, slices.Concat(topics.Catalogue(2), topics.ForClient("shop", 2), topics.ForClient("lang", 2)))
	f.prod = testkit.Client(t, f.brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	f.start()
	return f
}

func (f *fixture) start() {
	ready := make(chan struct{})
	f.s = search.New(search.Config{Cluster: testkit.Cluster(f.t, f.brokers), Dir: f.dir, Epochs: epochs(), Wait: 2 * time.Second,
		Discover: 5 * time.Second, Logger: testkit.Logger(), OnReady: func() { close(ready) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.s.Run(ctx) }()
	f.stop = func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Error(err)
		}
	}
	f.t.Cleanup(func() {
		if ctx.Err() == nil {
			f.stop()
		}
	})
	select {
	case <-ready:
	case err := <-done:
		f.t.Fatalf("the searcher stopped: %v", err)
	case <-time.After(time.Minute):
		f.t.Fatal("the searcher was never assigned its partitions")
	}
}

// put writes items to shop's feed and returns the last one's position.
func (f *fixture) put(items ...item) search.Position {
	f.t.Helper()
	var last *kgo.Record
	for _, it := range items {
		data, err := schemas.SaasDocuments.Encode(it.doc())
		if err != nil {
			f.t.Fatal(err)
		}
		r, err := f.prod.ProduceSync(testkit.Context(f.t, time.Minute), &kgo.Record{Topic: topics.SaasTopic("shop"), Key: []byte("shop/" + it.pk), Value: data}).First()
		if err != nil {
			f.t.Fatal(err)
		}
		last = r
	}
	return search.Position{Partition: last.Partition, Offset: last.Offset}
}

// settle waits until every partition of the feed is applied to its end.
func (f *fixture) settle() {
	f.t.Helper()
	adm := testkit.Admin(f.t, f.brokers)
	testkit.Eventually(f.t, time.Minute, "the feed applied", func() bool {
		ends, err := adm.ListEndOffsets(context.Background(), topics.SaasTopic("shop"))
		if err != nil {
			return false
		}
		ok := true
		ends.Each(func(o kadm.ListedOffset) { ok = ok && f.s.Applied("shop", o.Partition) >= o.Offset })
		return ok
	})
}

func (f *fixture) search(q search.Query) *search.Result {
	f.t.Helper()
	r, err := f.s.Search(testkit.Context(f.t, time.Minute), "shop", q)
	if err != nil {
		f.t.Fatalf("%+v: %v", q, err)
	}
	return r
}

// putDoc writes a document to a client's feed.
func (f *fixture) putDoc(client string, d *schemas.SaasDocument) {
	f.t.Helper()
	data, err := schemas.SaasDocuments.Encode(d)
	if err != nil {
		f.t.Fatal(err)
	}
	rec := &kgo.Record{Topic: topics.SaasTopic(client), Key: []byte(client + "/" + d.PK), Value: data}
	if err := f.prod.ProduceSync(testkit.Context(f.t, time.Minute), rec).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func pks(r *search.Result) []string {
	var out []string
	for _, h := range r.Hits {
		out = append(out, h.PK)
	}
	return out
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func f64(v float64) *float64 { return &v }

// TestWordsFiltersAndKNN: a small corpus with known answers: words, in a
// field or anywhere; ranges, terms and booleans; kNN by cosine; their
// combinations; sort; pages by cursor.
func TestWordsFiltersAndKNN(t *testing.T) {
	f := newFixture(t)
	f.put(corpus...)
	f.settle()
	check := func(name string, q search.Query, want []string, ordered bool) {
		t.Helper()
		got := pks(f.search(q))
		if !ordered {
			got, want = sorted(got), sorted(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("a word", search.Query{Query: "bicycle"}, []string{"1", "2", "4"}, false)
	check("words in a field", search.Query{Query: "red", Fields: []string{"title"}}, []string{"1", "3"}, false)
	check("a range", search.Query{Filters: []search.Filter{{Field: "price", Gte: f64(100), Lt: f64(1000)}}}, []string{"1", "2", "5"}, false)
	check("terms", search.Query{Filters: []search.Filter{{Field: "tags", In: []any{"car", "scooter"}}}}, []string{"3", "5"}, false)
	check("a boolean", search.Query{Filters: []search.Filter{{Field: "new", Eq: true}}}, []string{"4"}, false)
	check("words and a range", search.Query{Query: "bicycle", Filters: []search.Filter{{Field: "price", Gte: f64(100)}}}, []string{"1", "2"}, false)
	check("sorted by price", search.Query{Query: "bicycle", Sort: []search.Sort{{Field: "price", Order: "desc"}}}, []string{"2", "1", "4"}, true)
	check("kNN", search.Query{KNN: &search.KNN{Field: "vec", Vector: []float32{1, 0, 0}, K: 3}}, []string{"1", "2", "4"}, true)
	check("kNN in a filter", search.Query{KNN: &search.KNN{Field: "vec", Vector: []float32{0, 1, 0}, K: 2},
		Filters: []search.Filter{{Field: "tags", Eq: "bike"}}}, []string{"4", "2"}, true)

	// Pages of one by cursor: every bicycle once, in order.
	var paged []string
	q := search.Query{Query: "bicycle", Sort: []search.Sort{{Field: "price"}}, Limit: 1}
	for range 5 {
		r := f.search(q)
		paged = append(paged, pks(r)...)
		if r.Cursor == "" {
			break
		}
		q.Cursor = r.Cursor
	}
	if !slices.Equal(paged, []string{"4", "1", "2"}) {
		t.Errorf("pages by price: %v", paged)
	}
	// Pages of two of a filter alone (every score alike): each document
	// once.
	paged = nil
	q = search.Query{Filters: []search.Filter{{Field: "price", Gte: f64(0)}}, Limit: 2}
	for range 5 {
		r := f.search(q)
		paged = append(paged, pks(r)...)
		if r.Cursor == "" {
			break
		}
		q.Cursor = r.Cursor
	}
	if got := sorted(paged); !slices.Equal(got, []string{"1", "2", "3", "4", "5"}) || len(paged) != 5 {
		t.Errorf("pages of a filter: %v", paged)
	}
	r := f.search(search.Query{Query: "red bicycle", Limit: 1})
	if r.Total < 2 || len(r.Hits) != 1 || r.Hits[0].PK != "1" || r.Hits[0].Fields["title"] != "red bicycle" || r.Partial {
		t.Errorf("the best hit of red bicycle: %+v", r)
	}
}

// TestAnalyzersExactValuesAndANewEpoch: words are read by the analyzer
// each field's epoch names (English and Russian stems, folded case and
// diacritics); filters and sort take a string as it is; a string that
// reads as a date stays a string; a new epoch re-maps a field's analyzer
// and type, and the documents of the older epoch are still found by their
// own.
func TestAnalyzersExactValuesAndANewEpoch(t *testing.T) {
	f := newFixture(t)
	str := func(s string) schemas.Field { return schemas.Field{String: &s} }
	doc := func(pk string, epoch int64, fields map[string]schemas.Field) *schemas.SaasDocument {
		d := &schemas.SaasDocument{PK: pk, Action: schemas.ActionUpsert, Epoch: epoch, Version: 1, Timestamp: time.Now().UTC().Truncate(time.Millisecond)}
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			fd := fields[name]
			fd.Name = name
			d.Fields = append(d.Fields, fd)
		}
		return d
	}
	size := int64(42)
	f.putDoc("lang", doc("a", 1, map[string]schemas.Field{"title": str("Red Bicycles for kids"), "body": str("Детские велосипеды"),
		"note": str("Café crème"), "code": str("AB-12"), "size": str("2024-01-01")}))
	f.putDoc("lang", doc("b", 1, map[string]schemas.Field{"title": str("The bicycle's bell"), "body": str("Ёлочные игрушки"),
		"note": str("CAFE"), "code": str("ab-12"), "size": str("XL")}))
	f.putDoc("lang", doc("c", 2, map[string]schemas.Field{"title": str("Велосипеды и самокаты"), "size": {Int64: &size}}))
	f.putDoc("lang", doc("d", 2, map[string]schemas.Field{"title": str("Bicycles")}))
	f.putDoc("lang", doc("e", 1, map[string]schemas.Field{"code": str("2024-01-01")}))
	adm := testkit.Admin(t, f.brokers)
	testkit.Eventually(t, time.Minute, "lang's feed applied", func() bool {
		ends, err := adm.ListEndOffsets(context.Background(), topics.SaasTopic("lang"))
		ok := err == nil
		ends.Each(func(o kadm.ListedOffset) { ok = ok && f.s.Applied("lang", o.Partition) >= o.Offset })
		return ok
	})
	check := func(name string, q search.Query, want ...string) {
		t.Helper()
		r, err := f.s.Search(testkit.Context(t, time.Minute), "lang", q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := pks(r)
		if len(q.Sort) == 0 {
			got, want = sorted(got), sorted(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	words := func(q string, fields ...string) search.Query { return search.Query{Query: q, Fields: fields} }
	check("English stems and possessives (epoch 1's title)", words("bicycle", "title"), "a", "b")
	check("a Russian stem (the epoch's analyzer)", words("велосипед", "body"), "a")
	check("ё is е", words("елочные", "body"), "b")
	check("English stop words are not searched", words("the", "title"))
	check("case and accents fold", words("cafe", "note"), "a", "b")
	check("every string field, each by its analyzer", words("CAFÉ"), "a", "b")
	check("epoch 2's title is Russian, epoch 1's still English", words("велосипед", "title"), "c")
	check("a title of epoch 2 read in Russian: no English stem", words("bicycle", "title"), "a", "b")
	eq := func(field string, v any) search.Query {
		return search.Query{Filters: []search.Filter{{Field: field, Eq: v}}}
	}
	check("an exact value: case counts", eq("code", "AB-12"), "a")
	check("a string that reads as a date is a string", eq("code", "2024-01-01"), "e")
	check("and has words", words("2024", "code"), "e")
	check("sorted by a string as it is", search.Query{Filters: []search.Filter{{Field: "code", In: []any{"AB-12", "ab-12"}}},
		Sort: []search.Sort{{Field: "code", Order: "desc"}}}, "b", "a")
	check("epoch 2's size is a number", search.Query{Filters: []search.Filter{{Field: "size", Gte: f64(40)}}}, "c")
	if _, err := f.s.Search(testkit.Context(t, time.Minute), "lang", eq("size", "XL")); err == nil {
		t.Error("a string filter on a field the newest epoch makes a number was taken")
	}
}

// TestVersionsDeletesAndTTL: a newer version replaces an older one and
// never the reverse; a DELETE and a Kafka tombstone remove a document; an
// expired TTL hides it.
func TestVersionsDeletesAndTTL(t *testing.T) {
	f := newFixture(t)
	past := time.Now().Add(-time.Minute)
	f.put(item{pk: "a", title: "old lamp", version: 1}, item{pk: "a", title: "new lamp", version: 3}, item{pk: "a", title: "stale lamp", version: 2},
		item{pk: "b", title: "lamp shade", version: 1}, item{pk: "b", version: 2, delete: true},
		item{pk: "c", title: "lamp oil", version: 1, expires: &past, vec: []float32{1, 0, 0}},
		item{pk: "d", title: "lamp post", version: 1})
	if _, err := f.prod.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.SaasTopic("shop"), Key: []byte("shop/d")}).First(); err != nil {
		t.Fatal(err)
	}
	f.settle()
	r := f.search(search.Query{Query: "lamp"})
	if got := pks(r); !slices.Equal(got, []string{"a"}) || r.Hits[0].Version != 3 || r.Hits[0].Fields["title"] != "new lamp" {
		t.Fatalf("lamps: %+v", r)
	}
	// A kNN over every document leaves out the expired one too.
	if got := pks(f.search(search.Query{KNN: &search.KNN{Field: "vec", Vector: []float32{1, 0, 0}, K: 5}})); len(got) != 0 {
		t.Fatalf("a kNN found %v: the only document with a vector expired", got)
	}
	f.put(item{pk: "b", title: "lamp shade again", version: 1}) // older than its delete
	f.put(item{pk: "b", title: "lamp shade back", version: 5})
	f.settle()
	if got := sorted(pks(f.search(search.Query{Query: "lamp"}))); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after b's version 5: %v", got)
	}
	if r := f.search(search.Query{Query: "shade"}); r.Hits[0].Fields["title"] != "lamp shade back" {
		t.Fatalf("b: %+v", r.Hits)
	}
}

// TestAfterWaitsForItsPosition: a search after a document's position
// finds it; one after a position not written yet answers a WaitError once
// the wait runs out.
func TestAfterWaitsForItsPosition(t *testing.T) {
	f := newFixture(t)
	pos := f.put(item{pk: "x", title: "fresh kettle"})
	if got := pks(f.search(search.Query{Query: "kettle", After: &pos})); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("after its position: %v", got)
	}
	_, err := f.s.Search(testkit.Context(t, time.Minute), "shop", search.Query{Query: "kettle", After: &search.Position{Partition: pos.Partition, Offset: pos.Offset + 100}})
	var we *search.WaitError
	if !errors.As(err, &we) {
		t.Fatalf("after a position not written: %v", err)
	}
	f.put(item{pk: "y", title: "second kettle", version: 4})
	r, err := f.s.Search(testkit.Context(t, time.Minute), "shop", search.Query{Query: "kettle", MinVersion: &search.PKVersion{PK: "y", Version: 4}})
	if err != nil || !slices.Contains(pks(r), "y") {
		t.Fatalf("after y's version 4: %v, %v", r, err)
	}
	_, err = f.s.Search(testkit.Context(t, time.Minute), "shop", search.Query{Query: "kettle", MinVersion: &search.PKVersion{PK: "y", Version: 5}})
	if !errors.As(err, &we) || we.Version == nil {
		t.Fatalf("after a version not written: %v", err)
	}
}

// TestBadQueriesNameTheirMember: what cannot be run is refused naming the
// member at fault; a client without an epoch is unknown.
func TestBadQueriesNameTheirMember(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		q      search.Query
		member string
	}{
		{search.Query{}, "query"},
		{search.Query{Query: "x", Limit: 1001}, "limit"},
		{search.Query{Query: "x", Fields: []string{"price"}}, "fields[0]"},
		{search.Query{Filters: []search.Filter{{Field: "colour", Eq: "red"}}}, "filters[0].field"},
		{search.Query{Filters: []search.Filter{{Field: "title", Gte: f64(1)}}}, "filters[0]"},
		{search.Query{Filters: []search.Filter{{Field: "price", Eq: "cheap"}}}, "filters[0].eq"},
		{search.Query{KNN: &search.KNN{Field: "vec", Vector: []float32{1, 2}, K: 3}}, "knn.vector"},
		{search.Query{KNN: &search.KNN{Field: "other", Vector: []float32{1, 2, 3}, K: 3}}, "knn.field"},
		{search.Query{Query: "x", Sort: []search.Sort{{Field: "tags"}}}, "sort[0].field"},
		{search.Query{Query: "x", Cursor: "garbage!"}, "cursor"},
	} {
		_, err := f.s.Search(testkit.Context(t, time.Minute), "shop", c.q)
		var qe *search.QueryError
		if !errors.As(err, &qe) || qe.Member != c.member {
			t.Errorf("%+v: %v, want a QueryError on %s", c.q, err, c.member)
		}
	}
	if _, err := f.s.Search(testkit.Context(t, time.Minute), "nobody", search.Query{Query: "x"}); !errors.Is(err, search.ErrUnknownClient) {
		t.Errorf("an unknown client: %v", err)
	}
}

// TestAPoisonRecordIsDeadLettered: a feed record that does not decode goes
// to documents.dead with its reason; the documents after it are indexed.
func TestAPoisonRecordIsDeadLettered(t *testing.T) {
	f := newFixture(t)
	if _, err := f.prod.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.SaasTopic("shop"), Partition: 0,
		Key: []byte("shop/p"), Value: []byte("not avro")}).First(); err != nil {
		t.Fatal(err)
	}
	f.put(item{pk: "q", title: "after the poison"})
	f.settle()
	if got := pks(f.search(search.Query{Query: "poison"})); !slices.Equal(got, []string{"q"}) {
		t.Fatalf("after the poison: %v", got)
	}
	testkit.Eventually(t, time.Minute, "the dead letter", func() bool {
		for _, r := range testkit.ReadAll(t, f.brokers, topics.DocumentsDead) {
			if string(r.Key) == "shop/p" {
				return true
			}
		}
		return false
	})
}

// TestARestartAnswersAlike: a searcher stopped and started on its disk
// resumes where it was and answers every query as before; so does one
// whose indexes a replay rebuilt from the feed (offerlog replay searcher).
func TestARestartAnswersAlike(t *testing.T) {
	f := newFixture(t)
	f.put(corpus...)
	f.settle()
	queries := []search.Query{{Query: "bicycle"}, {Filters: []search.Filter{{Field: "price", Gte: f64(100)}}},
		{KNN: &search.KNN{Field: "vec", Vector: []float32{1, 0, 0}, K: 4}}}
	var before []string
	for _, q := range queries {
		before = append(before, fmt.Sprint(f.search(q).Hits))
	}
	answersAlike := func(after string) {
		t.Helper()
		for i, q := range queries {
			if r := f.search(q); fmt.Sprint(r.Hits) != before[i] {
				t.Errorf("%+v after %s: %s (partial %v, missing %v; applied %d %d), before %s", q, after, fmt.Sprint(r.Hits),
					r.Partial, r.Missing, f.s.Applied("shop", 0), f.s.Applied("shop", 1), before[i])
			}
		}
	}
	f.stop()
	f.start()
	f.settle()
	answersAlike("a restart")
	f.stop()
	if err := search.Replay(testkit.Context(t, time.Minute), search.Config{Cluster: testkit.Cluster(t, f.brokers), Dir: f.dir,
		Epochs: epochs(), Logger: testkit.Logger()}); err != nil {
		t.Fatal(err)
	}
	// The replay's member gone from the group first: a member still
	// there would take partitions from the searcher started next, and a
	// rebalance after its settle leaves a partition unheld while the
	// queries ask (make test saw docs 1 and 2 missing once).
	testkit.WaitGroupsEmpty(t, f.brokers, search.Group)
	f.start()
	f.settle()
	answersAlike("a replay")
}
