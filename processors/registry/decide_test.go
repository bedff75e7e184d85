package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func catalogue() *Catalogue {
	c := NewCatalogue(time.Minute)
	c.Put(&schemas.EpochSchema{Client: "shop", Epoch: 1, RegisteredAt: t0.Add(-time.Hour),
		Fields: []schemas.FieldSpec{
			{Name: "title", Type: schemas.TypeString, Required: true},
			{Name: "price", Type: schemas.TypeInt64},
			{Name: "score", Type: schemas.TypeDouble},
			{Name: "new", Type: schemas.TypeBool},
			{Name: "tags", Type: schemas.TypeStringList},
		},
		Embeddings: []schemas.EmbeddingSpec{{Name: "vec", Dimension: 3}},
	})
	// Epoch 2 is registered at t0 and in force a minute later.
	c.Put(&schemas.EpochSchema{Client: "shop", Epoch: 2, RegisteredAt: t0,
		Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString, Required: true}}})
	return c
}

func str(s string) *string { return &s }
func i64(i int64) *int64   { return &i }
func f64(f float64) *float64 {
	return &f
}

func doc(epoch, version int64, ts time.Time) *schemas.RawDocument {
	return &schemas.RawDocument{PK: "1", Epoch: epoch, Version: version, Action: schemas.ActionUpsert, Timestamp: ts,
		Fields: []schemas.Field{{Name: "title", String: str("bike")}}}
}

func ingestAt(d *schemas.RawDocument, at time.Time) Ingest {
	return Ingest{Key: "shop/1", Doc: d, Size: 100, Partition: 0, Offset: 1, At: at}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b Stamp
		want int
	}{
		{"epoch wins over version", Stamp{2, 1, t0}, Stamp{1, 9, t0.Add(time.Hour)}, 1},
		{"version wins over timestamp", Stamp{1, 2, t0}, Stamp{1, 1, t0.Add(time.Hour)}, 1},
		{"timestamp breaks ties", Stamp{1, 1, t0}, Stamp{1, 1, t0.Add(time.Millisecond)}, -1},
		{"equal", Stamp{1, 1, t0}, Stamp{1, 1, t0}, 0},
		{"older epoch", Stamp{1, 5, t0}, Stamp{2, 1, t0}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compare(tt.a, tt.b); got != tt.want {
				t.Fatalf("Compare(%v, %v) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	rules := DefaultRules()
	live := func(version int64) *schemas.RegistryRecord {
		return &schemas.RegistryRecord{Client: "shop", PK: "1", Epoch: 1, Version: version, Timestamp: t0,
			Status: schemas.StatusLive, Fields: []schemas.Field{{Name: "title", String: str("bike")}}, Embeddings: []schemas.Embedding{}}
	}
	tomb := func(version int64, until time.Time) *schemas.RegistryRecord {
		return &schemas.RegistryRecord{Client: "shop", PK: "1", Epoch: 1, Version: version, Timestamp: t0,
			Status: schemas.StatusTombstone, ExpiresAt: &until, Fields: []schemas.Field{}, Embeddings: []schemas.Embedding{}}
	}
	del := func(version int64) *schemas.RawDocument {
		d := doc(1, version, t0)
		d.Action, d.Fields = schemas.ActionDelete, nil
		return d
	}
	withTTL := func(d *schemas.RawDocument, s int64) *schemas.RawDocument { d.TTLSeconds = s; return d }
	tests := []struct {
		name    string
		cur     *schemas.RegistryRecord
		in      Ingest
		verdict schemas.Decision
		reason  string // substring
		status  schemas.Status
		write   bool
	}{
		{"first version accepted", nil, ingestAt(doc(1, 1, t0), t0), schemas.Accepted, "", schemas.StatusLive, true},
		{"newer version accepted", live(1), ingestAt(doc(1, 2, t0), t0), schemas.Accepted, "", schemas.StatusLive, true},
		{"older version stale", live(3), ingestAt(doc(1, 2, t0), t0), schemas.Stale, "older than the registry's live", "", false},
		{"same version same body is a duplicate", live(1), ingestAt(doc(1, 1, t0), t0), schemas.Accepted, "duplicate", "", false},
		{"same version other body stale", live(1), ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Fields[0].String = str("car")
			return d
		}(), t0), schemas.Stale, "content differs", "", false},
		{"delete leaves a tombstone", live(1), ingestAt(del(2), t0), schemas.Accepted, "", schemas.StatusTombstone, true},
		{"tombstone blocks an older upsert", tomb(5, t0.Add(time.Hour)), ingestAt(doc(1, 4, t0), t0), schemas.Stale, "tombstone", "", false},
		{"expired tombstone lets an older upsert in", tomb(5, t0), ingestAt(doc(1, 4, t0), t0.Add(time.Second)), schemas.Accepted, "", schemas.StatusLive, true},
		{"newer upsert replaces a tombstone", tomb(5, t0.Add(time.Hour)), ingestAt(doc(1, 6, t0), t0), schemas.Accepted, "", schemas.StatusLive, true},
		{"TTL run out before arrival", nil, ingestAt(withTTL(doc(1, 1, t0), 10), t0.Add(11*time.Second)), schemas.Stale, "TTL ran out", "", false},
		{"unknown client", nil, Ingest{Key: "nobody/1", Doc: doc(1, 1, t0), At: t0}, schemas.Invalid, "unknown client", "", false},
		{"unknown epoch", nil, ingestAt(doc(7, 1, t0), t0), schemas.Invalid, "unknown epoch 7", "", false},
		{"epoch registered after the message", nil, ingestAt(doc(2, 1, t0), t0.Add(-time.Second)), schemas.Invalid, "unknown epoch 2", "", false},
		{"new epoch accepted at once", nil, ingestAt(doc(2, 1, t0), t0.Add(time.Second)), schemas.Accepted, "", schemas.StatusLive, true},
		{"old epoch still good within grace", nil, ingestAt(doc(1, 1, t0), t0.Add(30*time.Second)), schemas.Accepted, "", schemas.StatusLive, true},
		{"old epoch stale after grace", nil, ingestAt(doc(1, 1, t0), t0.Add(2*time.Minute)), schemas.Stale, "older than the current epoch 2", "", false},
		{"bad key", nil, Ingest{Key: "nokey", Doc: doc(1, 1, t0), At: t0}, schemas.Invalid, "not client/pk", "", false},
		{"pk mismatch", nil, Ingest{Key: "shop/2", Doc: doc(1, 1, t0), At: t0}, schemas.Invalid, "does not match", "", false},
		{"too large", nil, Ingest{Key: "shop/1", Doc: doc(1, 1, t0), At: t0, Size: 200 * 1024}, schemas.Invalid, "more than the limit", "", false},
		{"no timestamp", nil, ingestAt(doc(1, 1, time.Time{}), t0), schemas.Invalid, "timestamp is missing", "", false},
		{"missing required field", nil, ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Fields = []schemas.Field{{Name: "price", Int64: i64(3)}}
			return d
		}(), t0), schemas.Invalid, `required field "title"`, "", false},
		{"wrong type", nil, ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Fields = append(d.Fields, schemas.Field{Name: "price", Double: f64(3)})
			return d
		}(), t0), schemas.Invalid, `"price" is double, epoch 1 declares int64`, "", false},
		{"undeclared field", nil, ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Fields = append(d.Fields, schemas.Field{Name: "colour", String: str("red")})
			return d
		}(), t0), schemas.Invalid, `"colour" is not in the schema`, "", false},
		{"wrong dimension", nil, ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Embeddings = []schemas.Embedding{{Name: "vec", Vector: []float32{1, 2}}}
			return d
		}(), t0), schemas.Invalid, "dimension 2, epoch 1 declares 3", "", false},
		{"no fields", nil, ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Fields = nil
			return d
		}(), t0), schemas.Invalid, "no fields", "", false},
		{"two values in a field", nil, ingestAt(func() *schemas.RawDocument {
			d := doc(1, 1, t0)
			d.Fields[0].Int64 = i64(1)
			return d
		}(), t0), schemas.Invalid, "exactly one value", "", false},
	}
	eps := catalogue()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Decide(tt.cur, tt.in, eps, rules)
			if out.Verdict != tt.verdict || !strings.Contains(out.Reason, tt.reason) {
				t.Fatalf("verdict %s %q, want %s containing %q", out.Verdict, out.Reason, tt.verdict, tt.reason)
			}
			wroteNew := out.Write && out.Record != nil && out.Record.SourceOffset == tt.in.Offset && out.Record.Cause == schemas.CauseIngest
			if wroteNew != tt.write {
				t.Fatalf("wrote a new record: %v, want %v (outcome %+v)", wroteNew, tt.write, out)
			}
			if tt.write && out.Record.Status != tt.status {
				t.Fatalf("status %s, want %s", out.Record.Status, tt.status)
			}
			if out.Verdict != schemas.Accepted && len(out.Changes) > 0 && out.Changes[len(out.Changes)-1].Cause == schemas.CauseIngest {
				t.Fatalf("a %s document was emitted as a change", out.Verdict)
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	rules := DefaultRules()
	eps := NewCatalogue(time.Minute)
	one, _ := catalogue().Get("shop", 1)
	eps.Put(one)
	d := doc(1, 1, t0)
	d.TTLSeconds = 60
	first := Decide(nil, ingestAt(d, t0), eps, rules)
	if first.Verdict != schemas.Accepted || first.Record.ExpiresAt == nil || !first.Record.ExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("TTL document: %+v", first)
	}
	rec := first.Record
	check := &schemas.ExpiryCheck{Epoch: 1, Version: 1, Timestamp: t0, Status: schemas.StatusLive}

	if out := Expire(rec, check, t0.Add(30*time.Second), rules); out.Write {
		t.Fatal("expired before its TTL")
	}
	early := Expire(rec, check, t0.Add(time.Minute), rules)
	late := Expire(rec, check, t0.Add(time.Hour), rules)
	if !early.Write || early.Record == nil || early.Record.Status != schemas.StatusTombstone {
		t.Fatalf("due TTL document did not become a tombstone: %+v", early)
	}
	if *early.Record.ExpiresAt != *late.Record.ExpiresAt || early.Record.IngestedAt != late.Record.IngestedAt {
		t.Fatal("the tombstone depends on when the check arrived")
	}
	if len(early.Changes) != 1 || early.Changes[0].Cause != schemas.CauseExpiry {
		t.Fatalf("expiry change: %+v", early.Changes)
	}
	// Lazy expiry by a later message gives the same tombstone.
	older := doc(1, 0, t0)
	lazy := Decide(rec, ingestAt(older, t0.Add(time.Hour)), eps, rules)
	if lazy.Verdict != schemas.Stale || !lazy.Write || lazy.Record.IngestedAt != early.Record.IngestedAt {
		t.Fatalf("lazy expiry: %+v", lazy)
	}
	// A check for another version is ignored.
	other := *check
	other.Version = 9
	if out := Expire(rec, &other, t0.Add(time.Hour), rules); out.Write {
		t.Fatal("a check of another version expired the document")
	}
	// The tombstone goes away after its own TTL.
	tcheck := &schemas.ExpiryCheck{Epoch: 1, Version: 1, Timestamp: t0, Status: schemas.StatusTombstone}
	gone := Expire(early.Record, tcheck, early.Record.ExpiresAt.Add(time.Second), rules)
	if !gone.Write || gone.Record != nil {
		t.Fatalf("expired tombstone not removed: %+v", gone)
	}
	// A record whose TTL and tombstone both ran out goes straight away.
	if out := Expire(rec, check, t0.Add(rules.TombstoneTTL+2*time.Minute), rules); !out.Write || out.Record != nil {
		t.Fatalf("long-expired document: %+v", out)
	}
}

func TestRecallAndRemember(t *testing.T) {
	rec := &schemas.RegistryRecord{PK: "1", SourcePartition: 2, SourceOffset: 10, Status: schemas.StatusLive}
	if _, found, seen := Recall(rec, 2, 5); found || !seen {
		t.Fatalf("an earlier message of the partition: found %v seen %v", found, seen)
	}
	if _, found, seen := Recall(rec, 1, 5); found || seen {
		t.Fatal("another partition's offset compared")
	}
	// Every verdict of the window is remembered, however many: more than
	// the 16 it once kept.
	r := rec
	for o := int64(11); o < 11+40; o++ {
		r = Remember(r, r, 2, o, schemas.Stale, fmt.Sprint("older ", o))
	}
	if len(r.RecentVerdicts) != 40 {
		t.Fatalf("%d verdicts remembered, want all 40 of the window", len(r.RecentVerdicts))
	}
	if v, found, _ := Recall(r, 2, 11); !found || v.Reason != "older 11" {
		t.Fatalf("the first verdict of the window: %+v %v", v, found)
	}
	// A message table.RememberWindow offsets on, the old ones are forgotten: no
	// batch reaches back so far.
	far := int64(30 + table.RememberWindow)
	r = Remember(r, r, 2, far, schemas.Stale, "far")
	if _, found, seen := Recall(r, 2, 30); found || !seen {
		t.Fatal("a verdict a window back is kept, or its message not seen")
	}
	if v, found, _ := Recall(r, 2, 31); !found || v.Reason != "older 31" {
		t.Fatalf("the verdict just within the window: %+v %v", v, found)
	}
	// Another partition's verdicts are not this one's offsets to drop.
	r = Remember(r, r, 3, 5, schemas.Stale, "other")
	r = Remember(r, r, 2, far+table.RememberWindow, schemas.Stale, "later")
	if _, found, _ := Recall(r, 3, 5); !found {
		t.Fatal("partition 2's offsets dropped partition 3's verdict")
	}
	// A bound holds a record's size.
	for o := far; o < far+table.Remembered+3; o++ {
		r = Remember(r, r, 4, o, schemas.Stale, "many")
	}
	if len(r.RecentVerdicts) != table.Remembered {
		t.Fatalf("%d verdicts remembered, bound %d", len(r.RecentVerdicts), table.Remembered)
	}
	if len(rec.RecentVerdicts) != 0 {
		t.Fatal("Remember changed its input")
	}
	if c := Change(r); len(c.RecentVerdicts) != 0 || len(r.RecentVerdicts) == 0 {
		t.Fatal("Change keeps the bookkeeping or changed its input")
	}
}

func TestKeysAreTheProducersBytes(t *testing.T) {
	long := strings.Repeat("k", schemas.MaxKeyBytes+1)
	for _, c := range []struct{ name, key, pk string }{
		{"pk over 1 KiB", "shop/" + long, long},
		{"pk not UTF-8", "shop/a\xffb", "a\xffb"},
		{"key's pk not UTF-8, document's decoded", "shop/a\xffb", "a\uFFFDb"},
		{"control character", "shop/a\x01b", "a\x01b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := doc(1, 1, t0)
			d.PK = c.pk
			in := ingestAt(d, t0)
			in.Key = c.key
			out := Decide(nil, in, catalogue(), DefaultRules())
			if out.Verdict != schemas.Invalid || !strings.Contains(out.Reason, "pk") {
				t.Fatalf("got %s %q, want INVALID naming the pk", out.Verdict, out.Reason)
			}
		})
	}
}
