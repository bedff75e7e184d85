package search

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/blevesearch/bleve/v2"
	bsearch "github.com/blevesearch/bleve/v2/search"
	bquery "github.com/blevesearch/bleve/v2/search/query"

	"github.com/offerlog/offerlog/schemas"
)

// MaxLimit is the most hits one page may ask for.
const MaxLimit = 1000

// DefaultLimit is a page's hits when the query names none.
const DefaultLimit = 20

// Query is a search of one client's documents: words (Query, in Fields or
// every string field), Filters that restrict, a kNN by cosine over an
// embedding; query and kNN score, filters only restrict. One of Query,
// Filters and KNN at least.
type Query struct {
	Query   string   `json:"query,omitempty"`
	Fields  []string `json:"fields,omitempty"`
	Filters []Filter `json:"filters,omitempty"`
	KNN     *KNN     `json:"knn,omitempty"`
	// Sort orders the hits (default: by score, best first); ties go by pk.
	Sort  []Sort `json:"sort,omitempty"`
	Limit int    `json:"limit,omitempty"`
	// Cursor is the previous page's: the page after it.
	Cursor string `json:"cursor,omitempty"`
	// After waits until the searcher has applied the feed's partition up
	// to and including this offset (read-your-writes).
	After *Position `json:"after,omitempty"`
	// MinVersion waits until the searcher has applied a version of the pk
	// at least this one (the version a writer sent; read-your-writes
	// without knowing the feed's positions).
	MinVersion *PKVersion `json:"min_version,omitempty"`
	// WithSort asks for each hit's sort values and the partitions
	// answered for (Hit.Sort, Result.Held): what the API merges the
	// members' answers by.
	WithSort bool `json:"with_sort,omitempty"`
}

// PKVersion is a document's version.
type PKVersion struct {
	PK      string `json:"pk"`
	Version int64  `json:"version"`
}

// Filter restricts the hits by one field: Eq (a string field is it, a
// string list holds it, exactly: case and accents count; a number equals
// it, a boolean is it), In (any of), and the range bounds of a number.
type Filter struct {
	Field string   `json:"field"`
	Eq    any      `json:"eq,omitempty"`
	In    []any    `json:"in,omitempty"`
	Gte   *float64 `json:"gte,omitempty"`
	Gt    *float64 `json:"gt,omitempty"`
	Lte   *float64 `json:"lte,omitempty"`
	Lt    *float64 `json:"lt,omitempty"`
}

// KNN asks for the K documents whose embedding Field is nearest Vector by
// cosine.
type KNN struct {
	Field  string    `json:"field"`
	Vector []float32 `json:"vector"`
	K      int       `json:"k"`
}

// Sort orders by a numeric, string or boolean field, asc (default) or
// desc; "_score" is the score.
type Sort struct {
	Field string `json:"field"`
	Order string `json:"order,omitempty"`
}

// Position is a record of a client's feed: its partition and offset.
type Position struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Result is a page of hits.
type Result struct {
	Hits []Hit `json:"hits"`
	// Total is how many documents match (for a kNN, at most K).
	Total  uint64 `json:"total"`
	Cursor string `json:"cursor,omitempty"`
	// Partial says some partitions did not answer (Missing).
	Partial bool    `json:"partial"`
	Missing []int32 `json:"missing,omitempty"`
	// Held are the partitions answered for, with Query.WithSort.
	Held []int32 `json:"held,omitempty"`
}

// Hit is one document found.
type Hit struct {
	PK      string         `json:"pk"`
	Version int64          `json:"version"`
	Score   float64        `json:"score"`
	Fields  map[string]any `json:"fields"`
	// Sort are the hit's sort values, with Query.WithSort.
	Sort []string `json:"sort,omitempty"`
}

// QueryError is a query that cannot be run: Member names the part at
// fault.
type QueryError struct {
	Member, Reason string
}

func (e *QueryError) Error() string { return e.Member + ": " + e.Reason }

func queryErr(member, format string, args ...any) error {
	return &QueryError{Member: member, Reason: fmt.Sprintf(format, args...)}
}

// fieldsOf returns what a client's epochs declare, the latest epoch's
// type of a field winning.
func fieldsOf(epochs []*schemas.EpochSchema) *clientFields {
	f := &clientFields{types: map[string]schemas.FieldType{}, analyzers: map[string][]string{}, embeddings: map[string]int{}}
	slices.SortFunc(epochs, func(a, b *schemas.EpochSchema) int { return cmp.Compare(a.Epoch, b.Epoch) })
	var declared []string // in the order of their first declaration
	for _, e := range epochs {
		for _, fs := range e.Fields {
			if _, ok := f.types[fs.Name]; !ok {
				declared = append(declared, fs.Name)
			}
			f.types[fs.Name] = fs.Type
			if fs.Type == schemas.TypeString || fs.Type == schemas.TypeStringList {
				if a := e.AnalyzerOf(fs); !slices.Contains(f.analyzers[fs.Name], a) {
					f.analyzers[fs.Name] = append(f.analyzers[fs.Name], a)
				}
			}
		}
		for _, v := range e.Embeddings {
			f.embeddings[v.Name] = v.Dimension
		}
	}
	for _, name := range declared {
		if t := f.types[name]; t == schemas.TypeString || t == schemas.TypeStringList {
			f.words = append(f.words, name)
		}
	}
	return f
}

// prepare checks q against the client's epochs and fills its defaults, as
// a searcher and a Remote both must before they search: it returns the
// client's fields and q's cursor.
func prepare(epochs Epochs, client string, q *Query) (*clientFields, cursor, error) {
	list := epochs.List(client)
	if len(list) == 0 {
		return nil, cursor{}, fmt.Errorf("%q: %w", client, ErrUnknownClient)
	}
	fields := fieldsOf(list)
	if err := q.validate(fields.types, fields.embeddings); err != nil {
		return nil, cursor{}, err
	}
	cur, err := decodeCursor(q.Cursor)
	return fields, cur, err
}

// validate checks q against the client's fields and embeddings, and fills
// its defaults.
func (q *Query) validate(fields map[string]schemas.FieldType, embeddings map[string]int) error {
	if m := q.MinVersion; m != nil && m.PK == "" {
		return queryErr("min_version.pk", "name the document")
	}
	if q.Query == "" && len(q.Filters) == 0 && q.KNN == nil {
		return queryErr("query", "give a query, filters or a knn")
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 0 || q.Limit > MaxLimit:
		return queryErr("limit", "want 1 to %d, got %d", MaxLimit, q.Limit)
	}
	for i, f := range q.Fields {
		if t, ok := fields[f]; !ok {
			return queryErr(fmt.Sprintf("fields[%d]", i), "no field %q", f)
		} else if t != schemas.TypeString && t != schemas.TypeStringList {
			return queryErr(fmt.Sprintf("fields[%d]", i), "%q is %s: words are searched in string fields", f, t)
		}
	}
	for i, f := range q.Filters {
		m := fmt.Sprintf("filters[%d]", i)
		t, ok := fields[f.Field]
		if !ok {
			return queryErr(m+".field", "no field %q", f.Field)
		}
		ranged := f.Gte != nil || f.Gt != nil || f.Lte != nil || f.Lt != nil
		if !ranged && f.Eq == nil && f.In == nil {
			return queryErr(m, "give eq, in or a range (gte, gt, lte, lt)")
		}
		if ranged && t != schemas.TypeInt64 && t != schemas.TypeDouble {
			return queryErr(m, "%q is %s: ranges are for numbers", f.Field, t)
		}
		for j, v := range append([]any{f.Eq}, f.In...) {
			if v == nil && j == 0 {
				continue
			}
			if !fits(t, v) {
				name := m + ".eq"
				if j > 0 {
					name = fmt.Sprintf("%s.in[%d]", m, j-1)
				}
				return queryErr(name, "%q is %s, not %v", f.Field, t, v)
			}
		}
	}
	if k := q.KNN; k != nil {
		dim, ok := embeddings[k.Field]
		switch {
		case !ok:
			return queryErr("knn.field", "no embedding %q", k.Field)
		case len(k.Vector) != dim:
			return queryErr("knn.vector", "%q has %d dimensions, the vector %d", k.Field, dim, len(k.Vector))
		case k.K < 1 || k.K > MaxLimit:
			return queryErr("knn.k", "want 1 to %d, got %d", MaxLimit, k.K)
		}
	}
	for i, s := range q.Sort {
		if s.Order != "" && s.Order != "asc" && s.Order != "desc" {
			return queryErr(fmt.Sprintf("sort[%d].order", i), "want asc or desc, got %q", s.Order)
		}
		if s.Field == "_score" {
			continue
		}
		if t, ok := fields[s.Field]; !ok || t == schemas.TypeStringList {
			return queryErr(fmt.Sprintf("sort[%d].field", i), "no field %q to sort by (a number, string or boolean, or _score)", s.Field)
		}
	}
	return nil
}

// fits reports whether a JSON value v may be compared with a field of
// type t.
func fits(t schemas.FieldType, v any) bool {
	switch v.(type) {
	case string:
		return t == schemas.TypeString || t == schemas.TypeStringList
	case float64, json.Number:
		return t == schemas.TypeInt64 || t == schemas.TypeDouble
	case bool:
		return t == schemas.TypeBool
	}
	return false
}

// bleveQuery returns the Bleve query of q's words and filters (nil: a
// kNN alone), each partition restricts it to what is visible
// (partIndex.restrict): the words are asked of each field named (or
// every string field) with each analyzer its epochs read it with.
func (q *Query) bleveQuery(fields *clientFields) bquery.Query {
	var parts []bquery.Query
	for _, f := range q.Filters {
		parts = append(parts, filterQuery(f))
	}
	if q.Query != "" {
		names := q.Fields
		if len(names) == 0 {
			names = fields.words
		}
		var any []bquery.Query
		for _, f := range names {
			for _, p := range fields.wordPaths(f) {
				m := bleve.NewMatchQuery(q.Query)
				m.SetField(p[0])
				m.Analyzer = p[1]
				any = append(any, m)
			}
		}
		if len(any) == 0 {
			return bleve.NewMatchNoneQuery()
		}
		parts = append(parts, bleve.NewDisjunctionQuery(any...))
	}
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	return bleve.NewConjunctionQuery(parts...)
}

func filterQuery(f Filter) bquery.Query {
	if f.Gte != nil || f.Gt != nil || f.Lte != nil || f.Lt != nil {
		lo, hi := f.Gte, f.Lte
		loIn, hiIn := true, true
		if f.Gt != nil {
			lo, loIn = f.Gt, false
		}
		if f.Lt != nil {
			hi, hiIn = f.Lt, false
		}
		r := bleve.NewNumericRangeInclusiveQuery(lo, hi, &loIn, &hiIn)
		r.SetField(f.Field)
		return r
	}
	values := f.In
	if f.Eq != nil {
		values = append([]any{f.Eq}, values...)
	}
	var any []bquery.Query
	for _, v := range values {
		any = append(any, valueQuery(f.Field, v))
	}
	return bleve.NewDisjunctionQuery(any...)
}

func valueQuery(field string, v any) bquery.Query {
	switch v := v.(type) {
	case string:
		t := bleve.NewTermQuery(v)
		t.SetField(exactPath(field))
		return t
	case bool:
		b := bleve.NewBoolFieldQuery(v)
		b.SetField(field)
		return b
	case json.Number:
		f, _ := v.Float64()
		return valueQuery(field, f)
	case float64:
		in := true
		r := bleve.NewNumericRangeInclusiveQuery(&v, &v, &in, &in)
		r.SetField(field)
		return r
	}
	return bleve.NewMatchNoneQuery()
}

// sortOrder is q's Bleve sort: its fields (a string by its value as it
// is), then the score, then the pk. With fields nil it orders hits by
// their sort values alone (the paths are not looked at).
func (q *Query) sortOrder(fields *clientFields) bsearch.SortOrder {
	var by []string
	score := false
	for _, s := range q.Sort {
		name := s.Field
		if fields != nil && fields.types[name] == schemas.TypeString {
			name = exactPath(name)
		}
		if name == "_score" {
			score = true
			if s.Order != "asc" {
				name = "-_score"
			}
		} else if s.Order == "desc" {
			name = "-" + name
		}
		by = append(by, name)
	}
	if !score {
		by = append(by, "-_score")
	}
	return bsearch.ParseSortOrderStrings(append(by, "_id"))
}

// cursor is what a page's cursor holds: the last hit's sort values (a
// word or filter query: the next page is after it, in every partition,
// whatever changed meanwhile), or how many of a kNN's K were shown.
type cursor struct {
	After []string `json:"a,omitempty"`
	Shown int      `json:"n,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	if s == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, queryErr("cursor", "not a cursor of this searcher")
	}
	return c, nil
}

// partHits searches one partition for a word or filter query: the page
// after c, in order, and one hit more (whether there is a next page),
// without their documents (only the merged page's are read).
func (p *partIndex) partHits(q *Query, bq bquery.Query, order bsearch.SortOrder, c cursor, now time.Time) (*bleve.SearchResult, error) {
	req := bleve.NewSearchRequestOptions(p.restrict(bq, now), q.Limit+1, 0, false)
	req.Sort = order.Copy()
	if len(c.After) > 0 {
		req.SearchAfter = c.After
	}
	return p.idx.Search(req)
}

// knnHits returns the partition's K nearest documents to k's vector among
// those bq matches (nil: every document), by cosine plus the words' score
// when q has words.
func (p *partIndex) knnHits(q *Query, bq bquery.Query, now time.Time) ([]*bsearch.DocumentMatch, error) {
	k := q.KNN
	target := normalised(map[string][]float32{k.Field: k.Vector})[k.Field]
	top := newTopK(k.K)
	if target == nil {
		return nil, nil // a zero vector is near nothing
	}
	if bq == nil {
		// Every document is a candidate: the vectors in memory are those
		// of the documents (not the tombstones'); only a TTL is left to
		// check.
		nowMs := now.UnixMilli()
		p.mu.RLock()
		defer p.mu.RUnlock()
		sl := p.slabs[vecKey(k.Field, len(target))]
		if sl == nil {
			return nil, nil
		}
		if !p.anyExpired(nowMs) {
			sl.scan(target, top.add)
		} else {
			sl.scan(target, func(pk string, d float64) {
				if at, ok := p.expires[pk]; !ok || at > nowMs {
					top.add(pk, d)
				}
			})
		}
		return top.sorted(), nil
	}
	// The candidates: every document the words and filters let in.
	req := bleve.NewSearchRequestOptions(p.restrict(bq, now), 1<<30, 0, false)
	req.Sort = bsearch.SortOrder{&bsearch.SortScore{Desc: true}, &bsearch.SortDocID{}}
	res, err := p.idx.Search(req)
	if err != nil {
		return nil, err
	}
	words := q.Query != ""
	p.mu.RLock()
	defer p.mu.RUnlock()
	sl := p.slabs[vecKey(k.Field, len(target))]
	if sl == nil {
		return nil, nil
	}
	for _, h := range res.Hits {
		v := sl.get(h.ID)
		if v == nil {
			continue
		}
		c := float64(dot(v, target))
		if words {
			c += h.Score
		}
		top.add(h.ID, c)
	}
	return top.sorted(), nil
}

// topK keeps the K best (score, then pk) of what it is given, in a heap
// whose root is the worst kept: a kNN over a partition's documents holds
// K of them, not all.
type topK struct {
	k int
	h []*bsearch.DocumentMatch
}

func newTopK(k int) *topK { return &topK{k: k, h: make([]*bsearch.DocumentMatch, 0, k)} }

// worse reports whether a ranks after b.
func worse(a, b *bsearch.DocumentMatch) bool { return byScore(a, b) > 0 }

func (t *topK) add(id string, score float64) {
	if len(t.h) == t.k {
		root := t.h[0]
		if score < root.Score || score == root.Score && id > root.ID {
			return // no better than the worst kept
		}
		t.h[0] = &bsearch.DocumentMatch{ID: id, Score: score}
		t.down(0)
		return
	}
	t.h = append(t.h, &bsearch.DocumentMatch{ID: id, Score: score})
	for i := len(t.h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !worse(t.h[i], t.h[parent]) {
			break
		}
		t.h[i], t.h[parent] = t.h[parent], t.h[i]
		i = parent
	}
}

func (t *topK) down(i int) {
	for {
		l, r, w := 2*i+1, 2*i+2, i
		if l < len(t.h) && worse(t.h[l], t.h[w]) {
			w = l
		}
		if r < len(t.h) && worse(t.h[r], t.h[w]) {
			w = r
		}
		if w == i {
			return
		}
		t.h[i], t.h[w] = t.h[w], t.h[i]
		i = w
	}
}

// sorted returns what is kept, best first.
func (t *topK) sorted() []*bsearch.DocumentMatch {
	out := slices.Clone(t.h)
	slices.SortFunc(out, byScore)
	return out
}

func byScore(a, b *bsearch.DocumentMatch) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// score formats a Bleve score as JSON keeps it.
func score(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 8, 64), 64)
	return v
}
