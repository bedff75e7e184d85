package search

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	bquery "github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/offerlog/offerlog/schemas"
)

// neverExpires is fieldExpires of a document without a TTL.
const neverExpires = float64(1 << 52)

// appliedKey is the internal key of the next offset of the partition's
// feed the index has not applied: written in the same Bleve batch as the
// documents it applied, so a restart resumes exactly there.
var appliedKey = []byte("offerlog.applied")

// layoutKey is the internal key of the index's layout.
var layoutKey = []byte("offerlog.layout")

// partIndex is the index of one partition of a client's feed.
type partIndex struct {
	client    string
	partition int32
	idx       bleve.Index

	mu       sync.RWMutex
	applied  int64            // next offset to apply
	target   int64            // the feed's end when the partition was assigned: answered for once applied
	current  bool             // applied reached target
	versions map[string]int64 // pk -> version applied (tombstones too)
	// slabs hold the embeddings, normalised, for kNN: by vecKey (a kNN
	// scans one embedding's slab).
	slabs   map[string]*slab
	expires map[string]int64 // pk -> Unix ms its TTL ends at, for the documents with one
	// soonest is at most the earliest TTL end in expires (math.MaxInt64
	// while none was set): before it, no document is past its TTL and a
	// query need not look.
	soonest int64
	changed chan struct{} // closed and replaced when applied moves
}

// vectors are a document's embeddings by name, each of unit length.
type vectors map[string][]float32

// openPart opens (or creates) the index of a partition in dir and loads
// what kNN and the version rule keep in memory. An index of another
// layout than this searcher's is removed: it is rebuilt from the feed.
func openPart(dir, client string, partition int32, log *slog.Logger) (*partIndex, error) {
	idx, err := openIndex(dir, log)
	if err != nil {
		return nil, fmt.Errorf("search index %s: %w", dir, err)
	}
	p := &partIndex{client: client, partition: partition, idx: idx, versions: map[string]int64{}, slabs: map[string]*slab{},
		expires: map[string]int64{}, soonest: math.MaxInt64, changed: make(chan struct{})}
	v, err := idx.GetInternal(appliedKey)
	if err != nil {
		idx.Close()
		return nil, err
	}
	if len(v) == 8 {
		p.applied = int64(binary.BigEndian.Uint64(v))
	}
	if err := p.load(); err != nil {
		idx.Close()
		return nil, err
	}
	return p, nil
}

// openIndex opens the Bleve index in dir, of this searcher's layout.
func openIndex(dir string, log *slog.Logger) (bleve.Index, error) {
	if _, err := os.Stat(dir); err == nil {
		idx, err := bleve.Open(dir)
		if err != nil {
			return nil, err
		}
		v, err := idx.GetInternal(layoutKey)
		if err != nil || string(v) == layout {
			if err != nil {
				idx.Close()
			}
			return idx, err
		}
		if err := idx.Close(); err != nil {
			return nil, err
		}
		log.Info("search: an index of another layout is rebuilt from the feed", "dir", dir, "layout", string(v), "want", layout)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	m, err := newMapping()
	if err != nil {
		return nil, err
	}
	idx, err := bleve.New(dir, m)
	if err != nil {
		return nil, err
	}
	if err := idx.SetInternal(layoutKey, []byte(layout)); err != nil {
		idx.Close()
		return nil, err
	}
	return idx, nil
}

// load reads every document's version and embeddings from the index.
func (p *partIndex) load() error {
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), 10_000, 0, false)
		req.Fields = []string{fieldVersion, fieldDoc}
		req.SortBy([]string{"_id"})
		req.SearchAfter = after
		res, err := p.idx.Search(req)
		if err != nil {
			return err
		}
		for _, h := range res.Hits {
			if v, ok := h.Fields[fieldVersion].(float64); ok {
				p.versions[h.ID] = int64(v)
			}
			if s, ok := h.Fields[fieldDoc].(string); ok {
				var d shown
				if json.Unmarshal([]byte(s), &d) == nil && len(d.Embeddings) > 0 {
					p.setVectors(h.ID, normalised(d.Embeddings))
				}
				if d.ExpiresAt != nil {
					p.setExpiry(h.ID, d.ExpiresAt.UnixMilli())
				}
			}
			after = h.Sort
		}
		if len(res.Hits) < 10_000 {
			return nil
		}
	}
}

// shown is a document as a hit shows it, and as fieldDoc keeps it.
type shown struct {
	PK         string               `json:"pk"`
	Version    int64                `json:"version"`
	Epoch      int64                `json:"epoch"`
	Timestamp  time.Time            `json:"timestamp"`
	ExpiresAt  *time.Time           `json:"expires_at,omitempty"`
	Fields     map[string]any       `json:"fields"`
	Embeddings map[string][]float32 `json:"embeddings,omitempty"`
}

// change is one record of the feed, decided: an upsert (doc set) or a
// removal (version -1: a Kafka tombstone, which removes whatever version
// is current).
type change struct {
	pk      string
	version int64
	doc     *schemas.SaasDocument // nil: remove
	epoch   *schemas.EpochSchema  // the doc's: how its fields are read
}

// apply applies changes, the records of the feed up to next (exclusive),
// in one Bleve batch with the position: a version not newer than the one
// applied is skipped (the feed's order decides, a record read again after
// a crash changes nothing).
func (p *partIndex) apply(changes []change, next int64) error {
	b := p.idx.NewBatch()
	versions := map[string]int64{}
	vecs := map[string]vectors{}
	expires := map[string]int64{} // 0: none
	for _, c := range changes {
		cur, ok := versions[c.pk]
		if !ok {
			p.mu.RLock()
			cur, ok = p.versions[c.pk]
			p.mu.RUnlock()
		}
		if c.version < 0 {
			c.version = cur // a Kafka tombstone: whatever is current goes
		}
		if ok && c.version <= cur && c.doc != nil {
			continue // an older or the same version: the newer stays
		}
		if ok && c.version < cur {
			continue // a removal of an older version
		}
		versions[c.pk] = c.version
		if c.doc == nil {
			// A tombstone keeps the version, so that an older upsert read
			// later does not bring the document back.
			if err := b.Index(c.pk, map[string]any{fieldVersion: float64(c.version)}); err != nil {
				return err
			}
			vecs[c.pk], expires[c.pk] = nil, 0
			continue
		}
		doc, sh := bleveDoc(c.doc, c.epoch)
		raw, err := json.Marshal(sh)
		if err != nil {
			return err
		}
		doc[fieldDoc] = string(raw)
		if err := b.Index(c.pk, doc); err != nil {
			return err
		}
		vecs[c.pk], expires[c.pk] = normalised(sh.Embeddings), 0
		if c.doc.ExpiresAt != nil {
			expires[c.pk] = c.doc.ExpiresAt.UnixMilli()
		}
	}
	pos := make([]byte, 8)
	binary.BigEndian.PutUint64(pos, uint64(next))
	b.SetInternal(appliedKey, pos)
	if err := p.idx.Batch(b); err != nil {
		return err
	}
	p.mu.Lock()
	for pk, v := range versions {
		p.versions[pk] = v
	}
	for pk, v := range vecs {
		p.setVectors(pk, v)
	}
	for pk, at := range expires {
		if at == 0 {
			delete(p.expires, pk)
		} else {
			p.setExpiry(pk, at)
		}
	}
	p.applied = next
	p.current = p.current || next >= p.target
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	return nil
}

// setExpiry records that pk's TTL ends at (Unix ms). Under p.mu, or
// before p is shared.
func (p *partIndex) setExpiry(pk string, at int64) {
	p.expires[pk] = at
	p.soonest = min(p.soonest, at)
}

// anyExpired reports whether a document may be past its TTL at nowMs.
// Under p.mu (read).
func (p *partIndex) anyExpired(nowMs int64) bool { return nowMs >= p.soonest }

// vecKey is the slab of an embedding's vectors of a dimension (a new
// epoch may change it: vectors of two dimensions are not compared).
func vecKey(name string, dim int) string { return fmt.Sprintf("%s/%d", name, dim) }

// setVectors makes vs pk's embeddings (nil: none). Under p.mu, or
// before p is shared.
func (p *partIndex) setVectors(pk string, vs vectors) {
	keep := map[string]bool{}
	for name, v := range vs {
		key := vecKey(name, len(v))
		keep[key] = true
		sl := p.slabs[key]
		if sl == nil {
			sl = newSlab(len(v))
			p.slabs[key] = sl
		}
		sl.set(pk, v)
	}
	for key, sl := range p.slabs {
		if !keep[key] {
			sl.remove(pk)
		}
	}
}

// bleveDoc returns what Bleve indexes of d, and how hits show it: its
// numbers and booleans at their names, its strings and string lists as
// they are and as words, by the analyzer its epoch names for each.
func bleveDoc(d *schemas.SaasDocument, epoch *schemas.EpochSchema) (map[string]any, shown) {
	doc := map[string]any{fieldVersion: float64(d.Version), fieldExpires: neverExpires}
	sh := shown{PK: d.PK, Version: d.Version, Epoch: d.Epoch, Timestamp: d.Timestamp, ExpiresAt: d.ExpiresAt, Fields: map[string]any{}}
	if d.ExpiresAt != nil {
		doc[fieldExpires] = float64(d.ExpiresAt.UnixMilli())
	}
	exact := map[string]any{}
	words := map[string]map[string]any{} // analyzer -> field -> value
	declared := map[string]schemas.FieldSpec{}
	if epoch == nil {
		epoch = &schemas.EpochSchema{} // every field standard
	}
	for _, f := range epoch.Fields {
		declared[f.Name] = f
	}
	text := func(name string, v any) {
		exact[name] = v
		a := epoch.AnalyzerOf(declared[name]) // a field not declared: the epoch's
		if words[a] == nil {
			words[a] = map[string]any{}
		}
		words[a][name] = v
	}
	for _, f := range d.Fields {
		switch {
		case f.String != nil:
			text(f.Name, *f.String)
			sh.Fields[f.Name] = *f.String
		case f.StringList != nil:
			text(f.Name, f.StringList)
			sh.Fields[f.Name] = f.StringList
		case f.Int64 != nil:
			sh.Fields[f.Name], doc[f.Name] = *f.Int64, float64(*f.Int64)
		case f.Double != nil:
			sh.Fields[f.Name], doc[f.Name] = *f.Double, *f.Double
		case f.Bool != nil:
			sh.Fields[f.Name], doc[f.Name] = *f.Bool, *f.Bool
		}
	}
	if len(exact) > 0 {
		doc[exactRoot] = exact
	}
	for a, fields := range words {
		doc[wordsRoot+a] = fields
	}
	if len(d.Embeddings) > 0 {
		sh.Embeddings = map[string][]float32{}
		for _, e := range d.Embeddings {
			sh.Embeddings[e.Name] = e.Vector
		}
	}
	return doc, sh
}

// normalised returns embeddings scaled to unit length (cosine is then a
// dot product); a zero vector is left out.
func normalised(es map[string][]float32) vectors {
	if len(es) == 0 {
		return nil
	}
	out := vectors{}
	for name, v := range es {
		var sum float64
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		if sum == 0 {
			continue
		}
		n := float32(1 / math.Sqrt(sum))
		u := make([]float32, len(v))
		for i, x := range v {
			u[i] = x * n
		}
		out[name] = u
	}
	return out
}

// catchUp sets the offset the index must apply before it answers for its
// partition: the feed's end when the partition was assigned (a member
// that takes a partition over catches up on its own copy first; until
// then the answer names the partition missing).
func (p *partIndex) catchUp(end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = end
	p.current = p.applied >= end
}

// answers reports whether the index has caught up with its partition.
func (p *partIndex) answers() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.current
}

// hasVersion reports whether the index applied a version of pk at least
// version.
func (p *partIndex) hasVersion(pk string, version int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, ok := p.versions[pk]
	return ok && v >= version
}

// position returns the next offset to apply, and a channel closed when it
// moves.
func (p *partIndex) position() (int64, <-chan struct{}) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.applied, p.changed
}

// maxExpiredIDs is the most expired documents restrict names one by one;
// past it, it asks the index for the TTLs ended.
const maxExpiredIDs = 1000

// restrict returns q restricted to the documents visible at now: those
// whose TTL has not ended. (A delete's tombstone holds no field of a
// client: no query of words, filters or vectors finds it.) Most
// partitions have no document past its TTL: q is asked as it is, with
// no range over every document's TTL.
func (p *partIndex) restrict(q bquery.Query, now time.Time) bquery.Query {
	return p.restrictNaming(q, now, maxExpiredIDs)
}

// restrictNaming is restrict naming at most most expired documents.
func (p *partIndex) restrictNaming(q bquery.Query, now time.Time, most int) bquery.Query {
	nowMs := now.UnixMilli()
	var expired []string
	p.mu.RLock()
	if !p.anyExpired(nowMs) {
		p.mu.RUnlock()
		return q
	}
	for pk, at := range p.expires {
		if at <= nowMs {
			expired = append(expired, pk)
		}
	}
	p.mu.RUnlock()
	switch {
	case len(expired) == 0:
		return q
	case len(expired) <= most:
		return bquery.NewBooleanQuery([]bquery.Query{q}, nil, []bquery.Query{bleve.NewDocIDQuery(expired)})
	}
	end := float64(nowMs)
	inclusive := true
	ended := bleve.NewNumericRangeInclusiveQuery(nil, &end, nil, &inclusive)
	ended.SetField(fieldExpires)
	return bquery.NewBooleanQuery([]bquery.Query{q}, nil, []bquery.Query{ended})
}

// document returns the stored document of pk, nil if it has none visible
// at now (a tombstone stores none).
func (p *partIndex) document(pk string, now time.Time) (*shown, error) {
	doc, err := p.idx.Document(pk)
	if err != nil || doc == nil {
		return nil, err
	}
	var stored []byte
	doc.VisitFields(func(f index.Field) {
		if f.Name() == fieldDoc {
			stored = f.Value()
		}
	})
	if stored == nil {
		return nil, nil
	}
	d, err := decodeShown(stored)
	if err != nil || d.ExpiresAt != nil && !d.ExpiresAt.After(now) {
		return nil, err
	}
	return d, nil
}

func decodeShown(s []byte) (*shown, error) {
	if len(s) == 0 {
		return nil, errors.New("search: a document without its stored form")
	}
	var d shown
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (p *partIndex) close() error { return p.idx.Close() }
