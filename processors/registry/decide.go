package registry

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
)

// Stamp is what orders the versions of one document: epoch, then version,
// then timestamp.
type Stamp struct {
	Epoch     int64
	Version   int64
	Timestamp time.Time
}

// Compare returns -1, 0 or +1 as a is older than, as fresh as, or fresher
// than b by (epoch, version, timestamp).
func Compare(a, b Stamp) int {
	switch {
	case a.Epoch != b.Epoch:
		return cmpInt(a.Epoch, b.Epoch)
	case a.Version != b.Version:
		return cmpInt(a.Version, b.Version)
	}
	return a.Timestamp.Compare(b.Timestamp)
}

func cmpInt(a, b int64) int {
	if a < b {
		return -1
	}
	return 1
}

func (s Stamp) String() string {
	return fmt.Sprintf("(epoch %d, version %d, timestamp %s)", s.Epoch, s.Version, s.Timestamp.UTC().Format(time.RFC3339Nano))
}

// StampOf returns the stamp of a registry record.
func StampOf(r *schemas.RegistryRecord) Stamp {
	return Stamp{Epoch: r.Epoch, Version: r.Version, Timestamp: r.Timestamp}
}

// Epochs answers what the registry needs to know of epoch schemas. The
// times passed are message timestamps, which makes answers the same in a
// live run and in a replay. Implementations must be safe for concurrent use.
type Epochs interface {
	// Lookup returns epoch e of client if it was registered at or before at.
	Lookup(client string, e int64, at time.Time) (*schemas.EpochSchema, bool)
	// Current returns the newest epoch of client that is in force at at,
	// and false if the client has none.
	Current(client string, at time.Time) (int64, bool)
}

// Rules are the registry's tunables.
type Rules struct {
	// MaxDocumentBytes bounds the encoded size of a document.
	MaxDocumentBytes int
	// TombstoneTTL is how long a tombstone blocks older versions.
	TombstoneTTL time.Duration
}

// DefaultRules returns the rules of the seed: 100 KB documents, tombstones
// kept for a week.
func DefaultRules() Rules {
	return Rules{MaxDocumentBytes: 100 * 1024, TombstoneTTL: 7 * 24 * time.Hour}
}

// Ingest is one message of documents.ingest as the registry sees it.
type Ingest struct {
	// Key is the message key, "client/pk".
	Key string
	// Doc is the decoded document.
	Doc *schemas.RawDocument
	// Size is the size of the encoded value.
	Size int
	// Partition, Offset and At (the record timestamp) place the message.
	Partition int32
	Offset    int64
	At        time.Time
}

// Outcome is what the registry does with one message.
type Outcome struct {
	// Verdict and Reason answer an ingested document (empty for an expiry
	// check, which gets no verdict).
	Verdict schemas.Decision
	Reason  string
	// Write is true when the table changes: to Record, or, if Record is nil,
	// by deleting the key.
	Write  bool
	Record *schemas.RegistryRecord
	// Changes are emitted on documents.changes, in order.
	Changes []*schemas.RegistryRecord
}

// SplitKey splits a "client/pk" key. The client is everything before the
// first '/'.
func SplitKey(key string) (client, pk string, ok bool) {
	client, pk, ok = strings.Cut(key, "/")
	return client, pk, ok && client != "" && pk != ""
}

// Decide returns what the registry does with an ingested document given the
// record it holds for the key (nil if none). It is a pure function of its
// arguments.
func Decide(cur *schemas.RegistryRecord, in Ingest, epochs Epochs, rules Rules) Outcome {
	invalid := func(format string, args ...any) Outcome {
		return Outcome{Verdict: schemas.Invalid, Reason: fmt.Sprintf(format, args...)}
	}
	client, pk, ok := SplitKey(in.Key)
	if !ok {
		return invalid("key %q is not client/pk", in.Key)
	}
	if err := schemas.CheckKey(pk); err != nil {
		return invalid("key's pk: %v", err)
	}
	doc := in.Doc
	if rules.MaxDocumentBytes > 0 && in.Size > rules.MaxDocumentBytes {
		return invalid("document is %d bytes, more than the limit of %d", in.Size, rules.MaxDocumentBytes)
	}
	if err := ValidateShape(doc); err != nil {
		return invalid("%v", err)
	}
	if doc.PK != pk {
		return invalid("pk %q does not match the key's pk %q", doc.PK, pk)
	}
	current, known := epochs.Current(client, in.At)
	schema, ok := epochs.Lookup(client, doc.Epoch, in.At)
	switch {
	case !ok && !known:
		return invalid("unknown client %q: no epoch registered", client)
	case !ok:
		return invalid("unknown epoch %d of client %q", doc.Epoch, client)
	case doc.Epoch < current:
		return Outcome{Verdict: schemas.Stale, Reason: fmt.Sprintf("epoch %d is older than the current epoch %d", doc.Epoch, current)}
	}
	if doc.Action == schemas.ActionUpsert {
		if err := Validate(doc, schema); err != nil {
			return invalid("%v", err)
		}
	}

	var out Outcome
	held := expireDue(cur, in.At, rules)
	if held != cur {
		out.Write, out.Record = true, held
		if held != nil {
			out.Changes = append(out.Changes, held)
		}
	}
	stamp := Stamp{Epoch: doc.Epoch, Version: doc.Version, Timestamp: doc.Timestamp}
	next := recordOf(client, doc, in, rules)
	if held != nil {
		switch c := Compare(stamp, StampOf(held)); {
		case c < 0:
			out.Verdict, out.Reason = schemas.Stale, fmt.Sprintf("%s is older than the registry's %s %s", stamp, strings.ToLower(string(held.Status)), StampOf(held))
			return out
		case c == 0 && sameContent(held, next):
			out.Verdict, out.Reason = schemas.Accepted, "duplicate of the current version"
			return out
		case c == 0:
			out.Verdict, out.Reason = schemas.Stale, fmt.Sprintf("%s equals the current version's but the content differs", stamp)
			return out
		}
	}
	if next.ExpiresAt != nil && !next.ExpiresAt.After(in.At) && next.Status == schemas.StatusLive {
		out.Verdict, out.Reason = schemas.Stale, fmt.Sprintf("TTL ran out at %s, before the document arrived", next.ExpiresAt.UTC().Format(time.RFC3339Nano))
		return out
	}
	out.Verdict = schemas.Accepted
	out.Write, out.Record = true, next
	out.Changes = append(out.Changes, next)
	return out
}

// Expire returns what the registry does with an expiry check of the version
// check names, received at at: if that version is still held and due, a
// live document becomes a tombstone and a due tombstone is removed.
func Expire(cur *schemas.RegistryRecord, check *schemas.ExpiryCheck, at time.Time, rules Rules) Outcome {
	if cur == nil || cur.Status != check.Status ||
		Compare(StampOf(cur), Stamp{Epoch: check.Epoch, Version: check.Version, Timestamp: check.Timestamp}) != 0 {
		return Outcome{}
	}
	held := expireDue(cur, at, rules)
	if held == cur {
		return Outcome{}
	}
	out := Outcome{Write: true, Record: held}
	if held != nil {
		out.Changes = []*schemas.RegistryRecord{held}
	}
	return out
}

// Due reports whether r has an expiry at or before at.
func Due(r *schemas.RegistryRecord, at time.Time) bool {
	return r != nil && r.ExpiresAt != nil && !r.ExpiresAt.After(at)
}

// AsOf returns what the record r is at time at once due expiries are
// applied: r itself, a tombstone, or nil. Readers use it to show a record
// as the registry will hold it, before the expiry check reaches it.
func AsOf(r *schemas.RegistryRecord, at time.Time, rules Rules) *schemas.RegistryRecord {
	return expireDue(r, at, rules)
}

// expireDue returns what r becomes at at: r itself if nothing is due, a
// tombstone for a live document whose TTL ran out, nil for a tombstone that
// expired. The result depends on r and the rules only, not on at, as long
// as it is due: so expiring early or late, lazily or by a check, ends in the
// same record.
func expireDue(r *schemas.RegistryRecord, at time.Time, rules Rules) *schemas.RegistryRecord {
	if !Due(r, at) {
		return r
	}
	if r.Status == schemas.StatusTombstone {
		return nil
	}
	due := *r.ExpiresAt
	tombUntil := due.Add(rules.TombstoneTTL)
	t := &schemas.RegistryRecord{
		Client: r.Client, PK: r.PK, Epoch: r.Epoch, Version: r.Version, Timestamp: r.Timestamp,
		Status: schemas.StatusTombstone, Cause: schemas.CauseExpiry, ExpiresAt: &tombUntil,
		TTLSeconds: r.TTLSeconds, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset,
		IngestedAt: due, Fields: []schemas.Field{}, Embeddings: []schemas.Embedding{},
		RecentVerdicts: r.RecentVerdicts,
	}
	return expireDue(t, at, rules)
}

func recordOf(client string, doc *schemas.RawDocument, in Ingest, rules Rules) *schemas.RegistryRecord {
	r := &schemas.RegistryRecord{
		Client: client, PK: doc.PK, Epoch: doc.Epoch, Version: doc.Version, Timestamp: doc.Timestamp,
		Cause: schemas.CauseIngest, TTLSeconds: doc.TTLSeconds,
		SourcePartition: in.Partition, SourceOffset: in.Offset, IngestedAt: in.At,
		Fields: []schemas.Field{}, Embeddings: []schemas.Embedding{},
	}
	switch doc.Action {
	case schemas.ActionDelete:
		r.Status = schemas.StatusTombstone
		until := in.At.Add(rules.TombstoneTTL)
		r.ExpiresAt = &until
	default:
		r.Status = schemas.StatusLive
		if doc.Fields != nil {
			r.Fields = doc.Fields
		}
		if doc.Embeddings != nil {
			r.Embeddings = doc.Embeddings
		}
		if doc.TTLSeconds > 0 {
			until := doc.Timestamp.Add(time.Duration(doc.TTLSeconds) * time.Second)
			r.ExpiresAt = &until
		}
	}
	return r
}

// sameContent reports whether two records of the same stamp carry the same
// document (status, TTL, fields and embeddings).
func sameContent(a, b *schemas.RegistryRecord) bool {
	return a.Status == b.Status && a.TTLSeconds == b.TTLSeconds &&
		slices.EqualFunc(a.Fields, b.Fields, fieldEqual) &&
		slices.EqualFunc(a.Embeddings, b.Embeddings, func(x, y schemas.Embedding) bool {
			return x.Name == y.Name && slices.Equal(x.Vector, y.Vector)
		})
}

func fieldEqual(a, b schemas.Field) bool {
	ta, _ := a.Type()
	tb, _ := b.Type()
	if a.Name != b.Name || ta != tb {
		return false
	}
	if ta == schemas.TypeStringList {
		return slices.Equal(a.StringList, b.StringList)
	}
	return a.Value() == b.Value()
}

// ValidateShape checks what every document must satisfy whatever its epoch:
// a pk, non-negative version and epoch, a known action, a timestamp, a
// non-negative TTL, and unique non-empty field and embedding names with one
// value each.
func ValidateShape(doc *schemas.RawDocument) error {
	switch {
	case schemas.CheckKey(doc.PK) != nil:
		return fmt.Errorf("pk: %w", schemas.CheckKey(doc.PK))
	case doc.Version < 0:
		return fmt.Errorf("version %d is negative", doc.Version)
	case doc.Epoch < 0:
		return fmt.Errorf("epoch %d is negative", doc.Epoch)
	case doc.Action != schemas.ActionUpsert && doc.Action != schemas.ActionDelete:
		return fmt.Errorf("action %q is not UPSERT or DELETE", doc.Action)
	case doc.Timestamp.UnixMilli() <= 0:
		return fmt.Errorf("timestamp is missing")
	case doc.TTLSeconds < 0:
		return fmt.Errorf("ttl_seconds %d is negative", doc.TTLSeconds)
	}
	seen := map[string]bool{}
	for _, f := range doc.Fields {
		if f.Name == "" {
			return fmt.Errorf("a field has no name")
		}
		if seen[f.Name] {
			return fmt.Errorf("field %q appears twice", f.Name)
		}
		seen[f.Name] = true
		if _, ok := f.Type(); !ok {
			return fmt.Errorf("field %q must hold exactly one value", f.Name)
		}
	}
	for _, e := range doc.Embeddings {
		if e.Name == "" {
			return fmt.Errorf("an embedding has no name")
		}
		if seen[e.Name] {
			return fmt.Errorf("name %q is used twice among fields and embeddings", e.Name)
		}
		seen[e.Name] = true
	}
	return nil
}

// Validate checks an upserted document against the schema of its epoch:
// at least one field; every field declared, of its declared type, finite;
// every required field present; every embedding declared, of its declared
// dimension, finite.
func Validate(doc *schemas.RawDocument, schema *schemas.EpochSchema) error {
	if len(doc.Fields) == 0 {
		return fmt.Errorf("document has no fields")
	}
	specs := make(map[string]schemas.FieldSpec, len(schema.Fields))
	for _, s := range schema.Fields {
		specs[s.Name] = s
	}
	present := make(map[string]bool, len(doc.Fields))
	for _, f := range doc.Fields {
		spec, ok := specs[f.Name]
		if !ok {
			return fmt.Errorf("field %q is not in the schema of epoch %d", f.Name, schema.Epoch)
		}
		if t, _ := f.Type(); t != spec.Type {
			return fmt.Errorf("field %q is %s, epoch %d declares %s", f.Name, t, schema.Epoch, spec.Type)
		}
		if f.Double != nil && (math.IsNaN(*f.Double) || math.IsInf(*f.Double, 0)) {
			return fmt.Errorf("field %q is not a finite number", f.Name)
		}
		present[f.Name] = true
	}
	for _, s := range schema.Fields {
		if s.Required && !present[s.Name] {
			return fmt.Errorf("required field %q is missing", s.Name)
		}
	}
	dims := make(map[string]int, len(schema.Embeddings))
	for _, e := range schema.Embeddings {
		dims[e.Name] = e.Dimension
	}
	for _, e := range doc.Embeddings {
		dim, ok := dims[e.Name]
		if !ok {
			return fmt.Errorf("embedding %q is not in the schema of epoch %d", e.Name, schema.Epoch)
		}
		if len(e.Vector) != dim {
			return fmt.Errorf("embedding %q has dimension %d, epoch %d declares %d", e.Name, len(e.Vector), schema.Epoch, dim)
		}
		for _, x := range e.Vector {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("embedding %q holds a value that is not finite", e.Name)
			}
		}
	}
	return nil
}

// A message is decided again after a crash only if its batch's mark was
// lost (the table group skips what its marks name as applied): the
// messages of one batch. A record remembers the verdicts of its key's
// messages by table.RememberIn's rule: within table.RememberWindow
// offsets of the newest (any batch), at most table.Remembered; what it
// keeps is a function of the log, so a replay writes the same record. (It
// kept the last 16 verdicts: a key with more messages than that in one
// batch was answered differently after a crash.) One of more than
// table.Remembered messages of a key in one batch, decided again, is
// counted in offerlog_registry_redelivered_total.

// Recall looks for the verdict the registry gave before on message
// (partition, offset) of the record's key. found is true if the record
// remembers it; seen is true if the record shows that the message was
// decided before (a later message of the key was), remembered or not.
func Recall(r *schemas.RegistryRecord, partition int32, offset int64) (v schemas.RecentVerdict, found, seen bool) {
	if r == nil {
		return v, false, false
	}
	seen = r.SourcePartition == partition && r.SourceOffset > offset
	for _, rv := range r.RecentVerdicts {
		if rv.Partition != partition {
			continue
		}
		if rv.Offset == offset {
			return rv, true, true
		}
		seen = seen || rv.Offset > offset
	}
	return v, false, seen
}

// Remember returns a copy of next that remembers the verdicts prev did and
// the verdict on message (partition, offset), by table.RememberIn's rule.
func Remember(prev, next *schemas.RegistryRecord, partition int32, offset int64, verdict schemas.Decision, reason string) *schemas.RegistryRecord {
	out := *next
	var history []schemas.RecentVerdict
	if prev != nil {
		history = prev.RecentVerdicts
	}
	out.RecentVerdicts = table.RememberIn(history, schemas.RecentVerdict{Partition: partition, Offset: offset, Verdict: verdict, Reason: reason},
		func(rv schemas.RecentVerdict) bool {
			return rv.Partition == partition && table.Stale(rv.Offset, offset)
		})
	return &out
}

// Change returns r as it is emitted on documents.changes: without the
// registry's own bookkeeping.
func Change(r *schemas.RegistryRecord) *schemas.RegistryRecord {
	out := *r
	out.RecentVerdicts = []schemas.RecentVerdict{}
	return &out
}
