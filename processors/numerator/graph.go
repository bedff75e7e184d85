package numerator

import (
	"fmt"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Group is the numerator's goka group; its table is Table.
const Group goka.Group = "numerator"

// Table is the numerator's group table (topic numerator-table): one
// NumeratorEntry per offer key.
var Table = goka.GroupTable(Group)

// TableCodec is the codec of the table's values (*NumeratorEntry).
var TableCodec goka.Codec = streams.Table[schemas.NumeratorEntry]{C: schemas.NumeratorEntries}

var (
	offersStream      = goka.Stream(topics.NumeratorOffers)
	resultsStream     = goka.Stream(topics.NumeratorResults)
	assignmentsStream = goka.Stream(topics.NumeratorAssignments)
	deadStream        = goka.Stream(topics.NumeratorDead)
)

// Metrics of the numerator.
type Metrics struct {
	Offers      *metrics.Counter
	Dead        *metrics.Counter
	Assignments *metrics.Counter
	Seals       *metrics.CounterVec // by action
	// LockRefused counts markers that found the write lock held by another
	// master (the sealer then asks again every RetryEvery).
	LockRefused *metrics.Counter
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
		Loop:        streams.NewLoopMetrics(r),
	}
}

// Graph returns the numerator group: it records in which generation every
// key was last seen, and applies the sealer's decisions (numerator.results),
// emitting every changed assignment on numerator.assignments.
//
// partitions is how many numerator.offers and numerator.results have (0:
// placement not checked): a key on another partition than its own is
// dead-lettered, its entry being elsewhere.
func Graph(m *Metrics, partitions int32) *goka.GroupGraph {
	h := &handler{m: m, partitions: partitions}
	return goka.DefineGroup(Group,
		goka.Input(offersStream, new(codec.Bytes), h.offer),
		goka.Input(resultsStream, new(codec.Bytes), h.result),
		goka.Persist(TableCodec),
		goka.Output(assignmentsStream, streams.Avro[schemas.Assignment]{C: schemas.Assignments}),
		goka.Output(deadStream, streams.Avro[schemas.DeadLetter]{C: schemas.DeadLetters}),
	)
}

type handler struct {
	m          *Metrics
	partitions int32
}

func (h *handler) dead(ctx goka.Context, topic string, data []byte, reason string) {
	ctx.Emit(deadStream, ctx.Key(), streams.NewDeadLetter(string(Group), topic, ctx.Partition(), ctx.Offset(),
		[]byte(ctx.Key()), data, ctx.Timestamp(), reason))
	h.m.Dead.Inc()
}

func current(ctx goka.Context) *schemas.NumeratorEntry {
	return streams.TableValue[schemas.NumeratorEntry](ctx, deadStream)
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

func (h *handler) offer(ctx goka.Context, msg any) {
	data, _ := msg.([]byte)
	if reason := streams.Misplaced(ctx.Key(), ctx.Partition(), h.partitions); reason != "" {
		h.dead(ctx, topics.NumeratorOffers, data, reason)
		return
	}
	var o schemas.OfferSeen
	if err := schemas.OffersSeen.Decode(data, &o); err != nil {
		h.dead(ctx, topics.NumeratorOffers, data, fmt.Sprintf("undecodable offer: %v", err))
		return
	}
	e := current(ctx)
	if _, err := CheckOffer(ctx.Key(), &o, e); err != nil {
		h.dead(ctx, topics.NumeratorOffers, data, err.Error())
		return
	}
	if e == nil {
		e = &schemas.NumeratorEntry{BusinessID: o.BusinessID, OfferID: o.OfferID, ShopID: o.ShopID,
			WarehouseID: o.WarehouseID, Shard: -1, DocID: NoDocID}
	} else if e.LastSeen == o.Generation {
		// Seen again in the same generation: nothing changes, but the value
		// is written again. After a kill -9 the local store can hold a value
		// whose changelog write was never acknowledged (goka writes the
		// store first); the input, not committed, comes again, and without
		// this write the table topic would never get the key.
		streams.Reassert(ctx, e)
		h.m.Offers.Inc()
		return
	}
	next := *e
	next.SeenBefore, next.LastSeen = e.LastSeen, o.Generation
	ctx.SetValue(&next)
	h.m.Offers.Inc()
}

func (h *handler) result(ctx goka.Context, msg any) {
	data, _ := msg.([]byte)
	if reason := streams.Misplaced(ctx.Key(), ctx.Partition(), h.partitions); reason != "" {
		h.dead(ctx, topics.NumeratorResults, data, reason)
		return
	}
	var a schemas.Assignment
	if err := schemas.Assignments.Decode(data, &a); err != nil {
		h.dead(ctx, topics.NumeratorResults, data, fmt.Sprintf("undecodable result: %v", err))
		return
	}
	e := current(ctx)
	if e == nil {
		e = &schemas.NumeratorEntry{BusinessID: a.BusinessID, OfferID: a.OfferID, ShopID: a.ShopID, WarehouseID: a.WarehouseID}
	}
	if e.Shard == a.Shard && e.DocID == a.DocID && e.Version == a.Version {
		// A redelivered result: the value and the assignment are written
		// again, as above (the compacted assignments keep one either way).
		streams.Reassert(ctx, e)
		ctx.Emit(assignmentsStream, ctx.Key(), &a)
		return
	}
	next := *e
	next.Shard, next.DocID, next.Version = a.Shard, a.DocID, a.Version
	ctx.SetValue(&next)
	ctx.Emit(assignmentsStream, ctx.Key(), &a)
	h.m.Assignments.Inc()
}
