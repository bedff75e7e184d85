package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Group is the goka group of the registry; its table is Table.
const Group goka.Group = "registry"

// Table is the registry's group table (topic registry-table).
var Table = goka.GroupTable(Group)

// Names of the topics of the graph.
var (
	ingest  = goka.Stream(topics.DocumentsIngest)
	results = goka.Stream(topics.DocumentsResults)
	changes = goka.Stream(topics.DocumentsChanges)
	dead    = goka.Stream(topics.DocumentsDead)
)

// sweepVisitor is the name of the visitor that emits expiry checks.
const sweepVisitor = "expiry-sweep"

// TableCodec is the codec of the registry table's values (*RegistryRecord).
var TableCodec goka.Codec = streams.Table[schemas.RegistryRecord]{C: schemas.RegistryRecords}

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

// Graph returns the registry's group graph deciding with epochs and rules.
// With synced, a document naming an epoch the catalogue does not know yet,
// and recent enough for its registration to be in flight, waits for the
// catalogue's next sync (Catalogue.KeepSynced, run beside the processor);
// the callbacks themselves never call the broker. Partitions is how many
// documents.ingest has: a record on another partition than its key's is
// refused (0: not checked).
//
// Verdicts are written in framing (documents.results is an export topic).
func Graph(epochs *Catalogue, synced bool, rules Rules, partitions int32, framing schemas.Framing, m *Metrics) *goka.GroupGraph {
	h := &handler{epochs: epochs, synced: synced, rules: rules, partitions: partitions, m: m}
	return goka.DefineGroup(Group,
		goka.Input(ingest, new(codec.Bytes), h.ingest),
		goka.Persist(TableCodec),
		goka.Output(results, streams.Avro[schemas.Verdict]{C: schemas.Verdicts, Framing: framing}),
		goka.Output(changes, streams.Avro[schemas.RegistryRecord]{C: schemas.RegistryRecords}),
		goka.Output(dead, streams.Avro[schemas.DeadLetter]{C: schemas.DeadLetters}),
		// The sweep's expiry checks go into the group's own input.
		goka.Output(ingest, new(codec.Bytes)),
		goka.Visitor(sweepVisitor, h.sweep),
	)
}

type handler struct {
	epochs     *Catalogue
	synced     bool
	rules      Rules
	partitions int32
	m          *Metrics
}

func (h *handler) current(ctx goka.Context) *schemas.RegistryRecord {
	return streams.TableValue[schemas.RegistryRecord](ctx, dead)
}

func (h *handler) ingest(ctx goka.Context, msg any) {
	data, _ := msg.([]byte)
	at := ctx.Timestamp()
	if reason := Misplaced(ctx.Key(), data, ctx.Partition(), h.partitions); reason != "" {
		h.reject(ctx, data, reason)
		return
	}
	w, _, err := schemas.Writer(data)
	switch {
	case err != nil:
		h.reject(ctx, data, fmt.Sprintf("undecodable value: %v", err))
		return
	case w.Name == schemas.ExpiryCheckName:
		var check schemas.ExpiryCheck
		if err := schemas.ExpiryChecks.Decode(data, &check); err != nil {
			h.reject(ctx, data, fmt.Sprintf("undecodable expiry check: %v", err))
			return
		}
		out := Expire(h.current(ctx), &check, at, h.rules)
		if out.Write {
			h.m.ExpiryChecks.With("applied").Inc()
		} else {
			h.m.ExpiryChecks.With("ignored").Inc()
		}
		h.apply(ctx, out)
		return
	case w.Name != schemas.RawDocumentName:
		h.reject(ctx, data, fmt.Sprintf("value is a %s, not a %s", w.Name, schemas.RawDocumentName))
		return
	}
	var doc schemas.RawDocument
	if err := schemas.RawDocuments.Decode(data, &doc); err != nil {
		h.reject(ctx, data, fmt.Sprintf("undecodable document: %v", err))
		return
	}
	client, pk, _ := SplitKey(ctx.Key())
	verdict := &schemas.Verdict{Client: client, PK: pk, SourcePartition: ctx.Partition(), SourceOffset: ctx.Offset(),
		Epoch: doc.Epoch, Version: doc.Version, Timestamp: doc.Timestamp}
	cur := h.current(ctx)

	// A message decided before a crash, after the input's last commit:
	// answer it as the first time; the table already holds its effect.
	// Its own change is emitted again if the record is still its; a lazy
	// expiry it caused on the way is not (the key's next change covers it).
	rv, found, seen := Recall(cur, ctx.Partition(), ctx.Offset())
	if found {
		h.m.Redelivered.With("recalled").Inc()
		streams.Reassert(ctx, cur)
		if rv.Verdict == schemas.Accepted && cur.SourcePartition == ctx.Partition() && cur.SourceOffset == ctx.Offset() {
			h.emitChange(ctx, cur) // its change may not have been written before the crash
		}
		verdict.Verdict, verdict.Reason = rv.Verdict, rv.Reason
		h.verdict(ctx, verdict)
		return
	}
	if seen {
		h.m.Redelivered.With("decided again").Inc()
	}

	in := Ingest{Key: ctx.Key(), Doc: &doc, Size: len(data), Partition: ctx.Partition(), Offset: ctx.Offset(), At: at}
	epochs := &syncing{h: h, ctx: ctx.Context()}
	out := Decide(cur, in, epochs, h.rules)
	if epochs.err != nil {
		// The catalogue could not be caught up: the cluster is failing, not
		// the message. Stop so that the message is decided again on restart.
		ctx.Fail(epochs.err)
	}
	// Verdicts that depend on the record held are remembered with it.
	next := cur
	if out.Write {
		next = out.Record
	}
	if next != nil && (out.Verdict == schemas.Accepted || out.Verdict == schemas.Stale) {
		out.Write, out.Record = true, Remember(cur, next, ctx.Partition(), ctx.Offset(), out.Verdict, out.Reason)
	}
	h.apply(ctx, out)
	verdict.Verdict, verdict.Reason = out.Verdict, out.Reason
	h.verdict(ctx, verdict)
}

func (h *handler) apply(ctx goka.Context, out Outcome) {
	if out.Write {
		if out.Record == nil {
			ctx.Delete()
		} else {
			ctx.SetValue(out.Record)
		}
	}
	for _, c := range out.Changes {
		h.emitChange(ctx, c)
	}
}

func (h *handler) emitChange(ctx goka.Context, r *schemas.RegistryRecord) {
	ctx.Emit(changes, ctx.Key(), Change(r))
	h.m.Changes.Inc()
}

func (h *handler) verdict(ctx goka.Context, v *schemas.Verdict) {
	ctx.Emit(results, ctx.Key(), v)
	h.m.Verdicts.With(string(v.Verdict)).Inc()
}

// Misplaced returns why a record of documents.ingest cannot be decided at
// all, or "": a null value (the processor is built to see them: goka drops
// them by default), a key that is not client/pk, or a key on another
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
func (h *handler) reject(ctx goka.Context, data []byte, reason string) {
	ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(string(Group), topics.DocumentsIngest,
		ctx.Partition(), ctx.Offset(), []byte(ctx.Key()), data, ctx.Timestamp(), reason))
	h.m.DeadLetters.Inc()
	client, pk, ok := SplitKey(ctx.Key())
	if !ok {
		client, pk = "", ctx.Key()
	}
	h.verdict(ctx, &schemas.Verdict{
		Client: client, PK: pk, Verdict: schemas.Invalid, Reason: reason,
		SourcePartition: ctx.Partition(), SourceOffset: ctx.Offset(), Timestamp: ctx.Timestamp(),
	})
}

// sweep is the visitor that emits an expiry check for every record due at
// the time passed as meta. The checks travel through documents.ingest, so
// expiry takes its place in the partition's one order of events.
func (h *handler) sweep(ctx goka.Context, meta any) {
	now, _ := meta.(time.Time)
	cur := h.current(ctx)
	if !Due(cur, now) {
		return
	}
	data, err := schemas.ExpiryChecks.Encode(&schemas.ExpiryCheck{
		Epoch: cur.Epoch, Version: cur.Version, Timestamp: cur.Timestamp, Status: cur.Status,
	})
	if err != nil {
		ctx.Fail(fmt.Errorf("registry: encode expiry check: %w", err))
	}
	ctx.Emit(ingest, ctx.Key(), data)
	h.m.ExpiryChecks.With("emitted").Inc()
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
