package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group is the registry's consumer group; its table is Table (the API and
// the indexer read it through views).
const Group = "registry"

// Table is the registry's group table (topic registry-table).
var Table = table.GroupTable(Group)

// TableCodec is the codec of the registry table's values (*RegistryRecord).
var TableCodec streams.Codec = streams.Table[schemas.RegistryRecord]{C: schemas.RegistryRecords}

// Metrics of the registry.
type Metrics struct {
	Verdicts     *metrics.CounterVec // by verdict
	DeadLetters  *metrics.Counter
	Changes      *metrics.Counter
	ExpiryChecks *metrics.CounterVec // by outcome: emitted, applied, ignored
	// Redelivered counts messages decided before a crash: "recalled" got
	// their first verdict again, "decided again" were no longer remembered.
	Redelivered *metrics.CounterVec
}

// NewMetrics registers the registry's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Verdicts:     r.Counter("offerlog_registry_verdicts_total", "Verdicts given by the registry.", "verdict"),
		DeadLetters:  r.Counter("offerlog_registry_dead_letters_total", "Undecodable messages sent to documents.dead.").With(),
		Changes:      r.Counter("offerlog_registry_changes_total", "Changes emitted on documents.changes.").With(),
		ExpiryChecks: r.Counter("offerlog_registry_expiry_checks_total", "Expiry checks by outcome.", "outcome"),
		Redelivered: r.Counter("offerlog_registry_redelivered_total",
			"Messages seen again after a crash, by whether their first verdict was remembered.", "outcome"),
	}
}

// newGroup returns the registry group deciding with epochs and rules
// (table.Group: each partition's documents a batch at a time). With
// synced, a document naming an epoch the catalogue does not know yet, and
// recent enough for its registration to be in flight, waits for the
// catalogue's next sync (Catalogue.KeepSynced, run beside the group); the
// handler itself never calls the broker. partitions is how many
// documents.ingest has: a record on another partition than its key's is
// refused (0: not checked).
//
// Verdicts are written in framing (documents.results is an export topic).
func newGroup(cfg Config, synced bool, partitions int32) *table.Group {
	h := &handler{epochs: cfg.Epochs, synced: synced, rules: cfg.Rules, partitions: partitions, m: cfg.Metrics,
		verdicts: streams.Avro[schemas.Verdict]{C: schemas.Verdicts, Framing: cfg.Framing}}
	return &table.Group{
		Streams: cfg.Streams, Name: Group, Table: Table,
		Inputs: []string{topics.DocumentsIngest},
		// The sweep's expiry checks go into the group's own input.
		Outputs:   []string{topics.DocumentsResults, topics.DocumentsChanges, topics.DocumentsUrgent, topics.DocumentsDead, topics.DocumentsIngest},
		DeadTopic: topics.DocumentsDead,
		Handle:    h.batch, OnReady: cfg.OnReady,
		Logger: cfg.Logger,
	}
}

type handler struct {
	epochs     *Catalogue
	synced     bool
	rules      Rules
	partitions int32
	m          *Metrics
	verdicts   streams.Avro[schemas.Verdict]
}

// batch decides one partition's documents and expiry checks in order: the
// records of their keys are read once, changed in memory, and written once
// each at the end.
func (h *handler) batch(ctx context.Context, b table.BatchTable) error {
	records, err := table.LoadEntries(b, schemas.RegistryRecords, func(r *kgo.Record, d *schemas.DeadLetter) {
		h.emitDead(b, r, d)
	})
	if err != nil {
		return err
	}
	for _, r := range b.Input().Records {
		if err := h.ingest(ctx, b, records, r); err != nil {
			return err
		}
	}
	return records.Flush()
}

// ingest decides one record of documents.ingest. It returns an error only
// when the cluster fails (the epoch catalogue cannot be caught up): the
// batch is then tried again, nothing of it kept.
func (h *handler) ingest(ctx context.Context, b table.BatchTable, records *table.Entries[schemas.RegistryRecord], r *kgo.Record) error {
	data, key, at := r.Value, string(r.Key), r.Timestamp
	if reason := Misplaced(key, data, r.Partition, h.partitions); reason != "" {
		h.reject(b, r, reason)
		return nil
	}
	w, _, err := schemas.Writer(data)
	switch {
	case err != nil:
		h.reject(b, r, fmt.Sprintf("undecodable value: %v", err))
		return nil
	case w.Name == schemas.ExpiryCheckName:
		var check schemas.ExpiryCheck
		if err := schemas.ExpiryChecks.Decode(data, &check); err != nil {
			h.reject(b, r, fmt.Sprintf("undecodable expiry check: %v", err))
			return nil
		}
		out := Expire(records.Get(r), &check, at, h.rules)
		if out.Write {
			h.m.ExpiryChecks.With("applied").Inc()
		} else {
			h.m.ExpiryChecks.With("ignored").Inc()
		}
		h.apply(b, records, r, out)
		return nil
	case w.Name != schemas.RawDocumentName:
		h.reject(b, r, fmt.Sprintf("value is a %s, not a %s", w.Name, schemas.RawDocumentName))
		return nil
	}
	var doc schemas.RawDocument
	if err := schemas.RawDocuments.Decode(data, &doc); err != nil {
		h.reject(b, r, fmt.Sprintf("undecodable document: %v", err))
		return nil
	}
	client, pk, _ := SplitKey(key)
	verdict := &schemas.Verdict{Client: client, PK: pk, SourcePartition: r.Partition, SourceOffset: r.Offset,
		Epoch: doc.Epoch, Version: doc.Version, Timestamp: doc.Timestamp}
	cur := records.Get(r)

	// A message decided before a crash, after the input's last commit:
	// answer it as the first time; the table already holds its effect (it
	// is written after its changelog, which the store caught up from).
	// Its own change is emitted again if the record is still its; a lazy
	// expiry it caused on the way is not (the key's next change covers it).
	rv, found, seen := Recall(cur, r.Partition, r.Offset)
	if found {
		h.m.Redelivered.With("recalled").Inc()
		if rv.Verdict == schemas.Accepted && cur.SourcePartition == r.Partition && cur.SourceOffset == r.Offset {
			h.emitChange(b, r, cur) // its change may not have been written before the crash
		}
		verdict.Verdict, verdict.Reason = rv.Verdict, rv.Reason
		h.verdict(b, r, verdict)
		return nil
	}
	if seen {
		h.m.Redelivered.With("decided again").Inc()
	}

	in := Ingest{Key: key, Doc: &doc, Size: len(data), Partition: r.Partition, Offset: r.Offset, At: at}
	epochs := &syncing{h: h, ctx: ctx}
	out := Decide(cur, in, epochs, h.rules)
	if epochs.err != nil {
		// The catalogue could not be caught up: the cluster is failing, not
		// the message. The batch is decided again.
		return epochs.err
	}
	// Verdicts that depend on the record held are remembered with it.
	next := cur
	if out.Write {
		next = out.Record
	}
	if next != nil && (out.Verdict == schemas.Accepted || out.Verdict == schemas.Stale) {
		out.Write, out.Record = true, Remember(cur, next, r.Partition, r.Offset, out.Verdict, out.Reason)
	}
	h.apply(b, records, r, out)
	verdict.Verdict, verdict.Reason = out.Verdict, out.Reason
	h.verdict(b, r, verdict)
	return nil
}

func (h *handler) apply(b table.BatchTable, records *table.Entries[schemas.RegistryRecord], r *kgo.Record, out Outcome) {
	if out.Write {
		records.Set(r, out.Record) // nil deletes
	}
	for _, c := range out.Changes {
		h.emitChange(b, r, c)
	}
}

func (h *handler) emitChange(b table.BatchTable, r *kgo.Record, rec *schemas.RegistryRecord) {
	data, err := schemas.RegistryRecords.Encode(Change(rec))
	if err != nil {
		h.reject(b, r, fmt.Sprintf("its change does not encode: %v", err))
		return
	}
	b.Emit(r, &kgo.Record{Topic: topics.DocumentsChanges, Key: r.Key, Value: data})
	if Urgent(r) {
		b.Emit(r, &kgo.Record{Topic: topics.DocumentsUrgent, Key: r.Key, Value: data})
	}
	h.m.Changes.Inc()
}

// Urgent reports whether r, a record of documents.ingest, asks for the
// emergency queue (topics.PriorityHeader).
func Urgent(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == topics.PriorityHeader && string(h.Value) == topics.PriorityUrgent {
			return true
		}
	}
	return false
}

func (h *handler) verdict(b table.BatchTable, r *kgo.Record, v *schemas.Verdict) {
	data, err := h.verdicts.Encode(v)
	if err != nil {
		// A verdict always encodes (its fields are bounded); if it did not,
		// the record is still not obeyed.
		return
	}
	b.Emit(r, &kgo.Record{Topic: topics.DocumentsResults, Key: r.Key, Value: data})
	h.m.Verdicts.With(string(v.Verdict)).Inc()
}

// Misplaced returns why a record of documents.ingest cannot be decided at
// all, or "": a null value (documents.ingest takes no tombstones), a key
// that is not client/pk, or a key on another
// partition than the one Kafka's default partitioner (murmur2) gives it,
// where an older version of the document could win. Partitions 0 checks
// no partition.
func Misplaced(key string, value []byte, partition, partitions int32) string {
	switch {
	case value == nil:
		return "null value: documents.ingest takes RawDocuments (a deletion is a document with action DELETE)"
	case !validKey(key):
		return fmt.Sprintf("key %q is not client/pk", key)
	}
	return streams.Misplaced(key, partition, partitions)
}

func validKey(key string) bool {
	_, _, ok := SplitKey(key)
	return ok
}

// reject answers a message that is not a decodable document: an invalid
// verdict, and the message kept whole on documents.dead.
func (h *handler) reject(b table.BatchTable, r *kgo.Record, reason string) {
	h.emitDead(b, r, streams.NewDeadLetter(Group, topics.DocumentsIngest,
		r.Partition, r.Offset, r.Key, r.Value, r.Timestamp, reason))
	client, pk, ok := SplitKey(string(r.Key))
	if !ok {
		client, pk = "", string(r.Key)
	}
	h.verdict(b, r, &schemas.Verdict{
		Client: client, PK: pk, Verdict: schemas.Invalid, Reason: reason,
		SourcePartition: r.Partition, SourceOffset: r.Offset, Timestamp: r.Timestamp,
	})
}

func (h *handler) emitDead(b table.BatchTable, r *kgo.Record, d *schemas.DeadLetter) {
	data, err := schemas.DeadLetters.Encode(d)
	if err != nil {
		return // bounded: always encodes
	}
	b.Emit(r, &kgo.Record{Topic: topics.DocumentsDead, Key: r.Key, Value: data})
	h.m.DeadLetters.Inc()
}

// sweep returns the expiry check of the record of key (stored value
// value) if it is due at now: the checks travel through documents.ingest,
// so expiry takes its place in the partition's one order of events.
func (h *handler) sweep(now time.Time, key string, value []byte) []*kgo.Record {
	var cur schemas.RegistryRecord
	if schemas.RegistryRecords.Decode(value, &cur) != nil || !Due(&cur, now) {
		return nil // garbage is dead-lettered when its key is next written
	}
	data, err := schemas.ExpiryChecks.Encode(&schemas.ExpiryCheck{
		Epoch: cur.Epoch, Version: cur.Version, Timestamp: cur.Timestamp, Status: cur.Status,
	})
	if err != nil {
		return nil
	}
	h.m.ExpiryChecks.With("emitted").Inc()
	return []*kgo.Record{{Topic: topics.DocumentsIngest, Key: []byte(key), Value: data}}
}

// syncing is the Epochs the processor decides with: on a miss for a message
// newer than the catalogue's last sync, it waits for the next sync of the
// catalogue (a local wait: KeepSynced calls the broker) and asks again, so
// that a registration that was in flight is not missed.
type syncing struct {
	h   *handler
	ctx context.Context
	err error
}

func (s *syncing) Lookup(client string, e int64, at time.Time) (*schemas.EpochSchema, bool) {
	if sch, ok := s.h.epochs.Lookup(client, e, at); ok {
		return sch, true
	}
	if !s.h.synced || at.Before(s.h.epochs.SyncedAt().Add(-time.Second)) {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if err := s.h.epochs.WaitSynced(ctx, time.Now()); err != nil {
		s.err = fmt.Errorf("registry: catch up the epoch catalogue: %w", err)
		return nil, false
	}
	return s.h.epochs.Lookup(client, e, at)
}

func (s *syncing) Current(client string, at time.Time) (int64, bool) {
	return s.h.epochs.Current(client, at)
}
