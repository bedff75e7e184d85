package search

import (
	"slices"
	"strconv"

	bsearch "github.com/blevesearch/bleve/v2/search"
)

// cursorAfter is the cursor of the page after hit m in order: its sort
// values, the score itself where the order sorts by score (Bleve's hit
// holds a placeholder there, which search_after cannot place).
func cursorAfter(order bsearch.SortOrder, m *bsearch.DocumentMatch) string {
	after := slices.Clone(m.Sort)
	for i, so := range order {
		if _, ok := so.(*bsearch.SortScore); ok && i < len(after) {
			after[i] = strconv.FormatFloat(m.Score, 'g', -1, 64)
		}
	}
	return cursor{After: after}.encode()
}

// Merge merges the answers of searcher members to q (each asked with
// WithSort, a kNN with its K as the limit and no cursor) into the page q
// asks for: hits in q's order, totals summed, the partitions no member
// answered for (of partitions) missing.
func Merge(q Query, partitions int32, answers []*Result) (*Result, error) {
	cur, err := decodeCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	res := &Result{Hits: []Hit{}}
	held := map[int32]bool{}
	var hits []Hit
	more := false // a member has a page after its own
	for _, a := range answers {
		more = more || a.Cursor != ""
		for _, p := range a.Held {
			held[p] = true
		}
		res.Total += a.Total
		hits = append(hits, a.Hits...)
	}
	for p := range partitions {
		if !held[p] {
			res.Partial, res.Missing = true, append(res.Missing, p)
		}
	}
	if q.KNN != nil {
		slices.SortFunc(hits, func(a, b Hit) int {
			return byScore(&bsearch.DocumentMatch{ID: a.PK, Score: a.Score}, &bsearch.DocumentMatch{ID: b.PK, Score: b.Score})
		})
		hits = hits[:min(len(hits), q.KNN.K)]
		res.Total = uint64(len(hits))
		from := min(cur.Shown, len(hits))
		page := hits[from:min(from+q.Limit, len(hits))]
		if from+len(page) < len(hits) {
			res.Cursor = cursor{Shown: from + len(page)}.encode()
		}
		hits = page
	} else {
		order := q.sortOrder(nil) // by the members' sort values
		scoring, desc := order.CacheIsScore(), order.CacheDescending()
		match := func(h Hit) *bsearch.DocumentMatch {
			return &bsearch.DocumentMatch{ID: h.PK, Score: h.Score, Sort: h.Sort}
		}
		slices.SortStableFunc(hits, func(a, b Hit) int { return order.Compare(scoring, desc, match(a), match(b)) })
		more = more || len(hits) > q.Limit
		hits = hits[:min(len(hits), q.Limit)]
		if more && len(hits) > 0 {
			res.Cursor = cursorAfter(order, match(hits[len(hits)-1]))
		}
	}
	for _, h := range hits {
		h.Score, h.Sort = score(h.Score), nil
		res.Hits = append(res.Hits, h)
	}
	return res, nil
}
