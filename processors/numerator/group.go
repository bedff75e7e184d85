package numerator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group is the numerator's consumer group; its table is Table (the sealer
// reads it through a view).
const Group = "numerator"

// Table is the numerator's group table (topic numerator-table): one
// NumeratorEntry per offer key.
var Table = table.GroupTable(Group)

// TableCodec is the codec of the table's values (*NumeratorEntry).
var TableCodec streams.Codec = streams.Table[schemas.NumeratorEntry]{C: schemas.NumeratorEntries}

// Metrics of the numerator.
type Metrics struct {
	Offers      *metrics.Counter
	Dead        *metrics.Counter
	Assignments *metrics.Counter
	Seals       *metrics.CounterVec // by action
	// LockRefused counts markers that found the write lock held by another
	// master (the sealer then asks again every RetryEvery).
	LockRefused *metrics.Counter
	// Invalidated counts the states of other data centres declared
	// invalid (not handed over within the handover timeout);
	// HandoverFailing is how long the current handover has been failing.
	Invalidated     *metrics.Counter
	HandoverFailing *metrics.Gauge
	// Loop counts the sealer's markers by outcome (dead letters included).
	Loop *streams.LoopMetrics
}

// NewMetrics registers the numerator's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Offers:      r.Counter("offerlog_numerator_offers_total", "Offer sightings recorded.").With(),
		Dead:        r.Counter("offerlog_numerator_dead_letters_total", "Invalid or undecodable input sent to numerator.dead.").With(),
		Assignments: r.Counter("offerlog_numerator_assignments_total", "Assignments emitted on numerator.assignments.").With(),
		Seals:       r.Counter("offerlog_numerator_states_total", "States written, by the marker that made them.", "action"),
		LockRefused: r.Counter("offerlog_numerator_lock_refused_total", "Markers that found the write lock held by another master.").With(),
		Invalidated: r.Counter("offerlog_numerator_states_invalidated_total",
			"States of another data centre declared invalid: their master did not hand them over within --handover-timeout.").With(),
		HandoverFailing: r.Gauge("offerlog_numerator_handover_failing_seconds",
			"How long the adoption of another data centre's state has been failing (0: none failing).").With(),
		Loop: streams.NewLoopMetrics(r),
	}
}

// newGroup returns the numerator group: it records in which generation
// every key was last seen, and applies the sealer's decisions
// (numerator.results), emitting every changed assignment on
// numerator.assignments. It takes each partition's sightings and decisions
// a batch at a time (table.Group); its table is Table, which the
// sealer reads through a view.
//
// partitions is how many numerator.offers and numerator.results have (0:
// placement not checked): a key on another partition than its own is
// dead-lettered, its entry being elsewhere.
func newGroup(s table.Config, m *Metrics, partitions int32, logger *slog.Logger) *table.Group {
	h := &handler{m: m, partitions: partitions}
	return &table.Group{
		Streams: s, Name: Group, Table: Table,
		Inputs:    []string{topics.NumeratorOffers, topics.NumeratorResults},
		Outputs:   []string{topics.NumeratorAssignments, topics.NumeratorDead},
		DeadTopic: topics.NumeratorDead,
		Handle:    h.batch,
		Metrics:   m.Loop, Logger: logger,
	}
}

// HistoryKept is how many past assignments a key's entry keeps: a key
// changes at its first id, its expiry, a rebuild or reshard, an adoption,
// so this covers the states of the TTL window but for many rebuilds in it.
const HistoryKept = 8

// Remembered returns history with past appended, the last HistoryKept;
// history is not changed.
func Remembered(history []schemas.PastAssignment, past schemas.PastAssignment) []schemas.PastAssignment {
	out := append(slices.Clone(history), past)
	if len(out) > HistoryKept {
		out = out[len(out)-HistoryKept:]
	}
	return out
}

type handler struct {
	m          *Metrics
	partitions int32
}

// batch handles one partition's sightings or decisions: the entries of
// their keys are read at once, changed in memory record by record, and the
// entries that changed are written once each.
func (h *handler) batch(_ context.Context, b table.BatchTable) error {
	entries, err := table.LoadEntries(b, schemas.NumeratorEntries, func(r *kgo.Record, d *schemas.DeadLetter) {
		h.deadLetter(b, r, d)
	})
	if err != nil {
		return err
	}
	for _, r := range b.Input().Records {
		if reason := streams.Misplaced(string(r.Key), r.Partition, h.partitions); reason != "" {
			h.dead(b, r, reason)
			continue
		}
		switch r.Topic {
		case topics.NumeratorOffers:
			h.offer(b, r, entries)
		case topics.NumeratorResults:
			h.result(b, r, entries)
		}
	}
	return entries.Flush()
}

// dead dead-letters r with the reason, as an output of r (a replay does not
// write it again).
func (h *handler) dead(b table.BatchTable, r *kgo.Record, reason string) {
	h.deadLetter(b, r, streams.NewDeadLetter(Group, r.Topic, r.Partition, r.Offset, r.Key, r.Value, r.Timestamp, reason))
}

func (h *handler) deadLetter(b table.BatchTable, r *kgo.Record, d *schemas.DeadLetter) {
	data, err := schemas.DeadLetters.Encode(d)
	if err != nil {
		// A dead letter is bounded and always encodes; if it did not, the
		// record is still not obeyed.
		return
	}
	b.Emit(r, &kgo.Record{Topic: topics.NumeratorDead, Key: r.Key, Value: data})
	h.m.Dead.Inc()
}

// CheckOffer validates a sighting against its message key and the key's
// entry (nil if none): the key names the offer of the value, every part is
// there, and the generation does not go back.
func CheckOffer(msgKey string, o *schemas.OfferSeen, e *schemas.NumeratorEntry) (sharding.Key, error) {
	k, err := sharding.ParseKey(msgKey)
	if err != nil {
		return k, err
	}
	v := sharding.Key{BusinessID: uint64(o.BusinessID), OfferID: o.OfferID, ShopID: uint64(o.ShopID), WarehouseID: uint64(o.WarehouseID)}
	if o.BusinessID < 0 || o.ShopID < 0 || o.WarehouseID < 0 || v != k {
		return k, fmt.Errorf("the key %q and the value (%s) name different offers", msgKey, v)
	}
	if err := k.Validate(); err != nil {
		return k, err
	}
	if o.Generation < 0 {
		return k, fmt.Errorf("generation %d is negative", o.Generation)
	}
	if e != nil && o.Generation < e.LastSeen {
		return k, fmt.Errorf("generation %d goes back: the key was seen in %d", o.Generation, e.LastSeen)
	}
	return k, nil
}

func (h *handler) offer(b table.BatchTable, r *kgo.Record, entries *table.Entries[schemas.NumeratorEntry]) {
	var o schemas.OfferSeen
	if err := schemas.OffersSeen.Decode(r.Value, &o); err != nil {
		h.dead(b, r, fmt.Sprintf("undecodable offer: %v", err))
		return
	}
	e := entries.Get(r)
	if _, err := CheckOffer(string(r.Key), &o, e); err != nil {
		h.dead(b, r, err.Error())
		return
	}
	h.m.Offers.Inc()
	if e == nil {
		e = &schemas.NumeratorEntry{BusinessID: o.BusinessID, OfferID: o.OfferID, ShopID: o.ShopID,
			WarehouseID: o.WarehouseID, Shard: -1, DocID: NoDocID}
	} else if e.LastSeen == o.Generation {
		// Seen again in the same generation (or the sighting handled again
		// after a crash: the table, written after its changelog, holds what
		// its first handling set): nothing changes.
		return
	}
	next := *e
	next.SeenBefore, next.LastSeen = e.LastSeen, o.Generation
	entries.Set(r, &next)
}

func (h *handler) result(b table.BatchTable, r *kgo.Record, entries *table.Entries[schemas.NumeratorEntry]) {
	var a schemas.Assignment
	if err := schemas.Assignments.Decode(r.Value, &a); err != nil {
		h.dead(b, r, fmt.Sprintf("undecodable result: %v", err))
		return
	}
	v := sharding.Key{BusinessID: uint64(a.BusinessID), OfferID: a.OfferID, ShopID: uint64(a.ShopID), WarehouseID: uint64(a.WarehouseID)}
	if k, err := sharding.ParseKey(string(r.Key)); err != nil || a.BusinessID < 0 || a.ShopID < 0 || a.WarehouseID < 0 || k != v {
		h.dead(b, r, fmt.Sprintf("the key %q and the result (%s) name different offers", r.Key, v))
		return
	}
	e := entries.Get(r)
	if e == nil {
		e = &schemas.NumeratorEntry{BusinessID: a.BusinessID, OfferID: a.OfferID, ShopID: a.ShopID, WarehouseID: a.WarehouseID}
	}
	if e.Shard != a.Shard || e.DocID != a.DocID || e.Version != a.Version {
		next := *e
		if e.Version != "" {
			next.History = Remembered(e.History, schemas.PastAssignment{Shard: e.Shard, DocID: e.DocID, Version: e.Version, Generation: e.AssignedIn})
		}
		next.Shard, next.DocID, next.Version, next.AssignedIn = a.Shard, a.DocID, a.Version, a.Generation
		entries.Set(r, &next)
		h.m.Assignments.Inc()
		e = &next
	}
	// A decision handled again (after a crash) is answered again, from the
	// table: the compacted assignments keep one either way. The export
	// carries the key's history, so that an older state's mapping stays
	// readable from it (Lookup).
	a.History = e.History
	data, err := schemas.Assignments.Encode(&a)
	if err != nil {
		h.dead(b, r, fmt.Sprintf("result does not encode: %v", err))
		return
	}
	b.Emit(r, &kgo.Record{Topic: topics.NumeratorAssignments, Key: r.Key, Value: data})
}
