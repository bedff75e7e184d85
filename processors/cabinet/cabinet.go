// Package cabinet is the seller cabinet's group "cabinet": per seller, the
// number of offers in each preset and the counters of the seed (Active,
// Expired, Banned go up and down; Sold and MoneyEarned only grow), derived
// from the offer aggregate's cabinet.changes so that a replay recomputes
// them exactly. The ordered preset lists are the compacted topic
// cabinet.presets, read through a View.
package cabinet

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group is the cabinet's group; its table is Table.
const Group = "cabinet"

// Table is the cabinet's group table (topic cabinet-table).
var Table = table.GroupTable(Group)

// TableCodec is the codec of the table's values (*schemas.SellerCabinet).
var TableCodec streams.Codec = streams.Table[schemas.SellerCabinet]{C: schemas.SellerCabinets}

// Empty returns the cabinet of a seller with no offers.
func Empty(seller string) *schemas.SellerCabinet {
	c := &schemas.SellerCabinet{SellerID: seller, Presets: make(schemas.Counts, 0, len(offers.Presets)), Applied: schemas.Counts{}}
	for _, p := range offers.Presets {
		c.Presets.Add(p, 0)
	}
	return c
}

// Apply returns cab after change, and false when change was applied before
// (its source offset is not past the last applied from its source
// partition: the aggregate emits a partition's changes in offset order, so
// a lower one is a redelivery or a replay). cab may be nil.
func Apply(cab *schemas.SellerCabinet, ch *schemas.CabinetChange) (*schemas.SellerCabinet, bool) {
	src := ch.SourceTopic + "/" + strconv.Itoa(int(ch.SourcePartition))
	if cab != nil {
		for _, a := range cab.Applied {
			if a.Name == src && ch.SourceOffset <= a.Count {
				return cab, false
			}
		}
	}
	next := Empty(ch.SellerID)
	if cab != nil {
		next = clone(cab)
	}
	next.Applied.Set(src, ch.SourceOffset)
	add(next, ch.Before, -1)
	add(next, ch.After, +1)
	if ch.After.Sold && !ch.Before.Sold {
		next.Sold++
		next.MoneyEarned = AddMoney(next.MoneyEarned, ch.After.SoldPrice)
	}
	return next, true
}

// AddMoney returns sum + price, never wrapping: a negative price (which
// validation refuses, but an old record may hold) adds nothing, and a sum
// that would pass math.MaxInt64 stays there.
func AddMoney(sum, price int64) int64 {
	if price <= 0 {
		return sum
	}
	if sum > math.MaxInt64-price {
		return math.MaxInt64
	}
	return sum + price
}

// add counts (sign +1) or uncounts (-1) a summary's presets.
func add(c *schemas.SellerCabinet, s schemas.Summary, sign int64) {
	for _, p := range s.Presets {
		c.Presets.Add(p, sign)
		switch p {
		case offers.PresetActive:
			c.Active += sign
		case offers.PresetExpired:
			c.Expired += sign
		case offers.PresetBanned:
			c.Banned += sign
		}
	}
}

func clone(c *schemas.SellerCabinet) *schemas.SellerCabinet {
	n := *c
	n.Presets = slices.Clone(c.Presets)
	n.Applied = slices.Clone(c.Applied)
	return &n
}

// Keys returns the keys of seller's cabinet in cabinet-table: the one of a
// cabinet written before it was spread, then seller/0 ... (offers.CabinetKey).
func Keys(seller string) []string {
	out := []string{seller}
	for n := range offers.CabinetSpread {
		out = append(out, seller+"/"+strconv.Itoa(n))
	}
	return out
}

// Sum returns seller's cabinet from its parts (nil ones are empty):
// counts and counters add up. Applied is left empty.
func Sum(seller string, parts ...*schemas.SellerCabinet) *schemas.SellerCabinet {
	out := Empty(seller)
	for _, c := range parts {
		if c == nil {
			continue
		}
		for _, p := range c.Presets {
			out.Presets.Add(p.Name, p.Count)
		}
		out.Active += c.Active
		out.Expired += c.Expired
		out.Banned += c.Banned
		out.Sold += c.Sold
		out.MoneyEarned = AddMoney(out.MoneyEarned, c.MoneyEarned)
	}
	return out
}

// Merge returns every seller's cabinet from the values of cabinet-table
// by key (its parts summed).
func Merge(table map[string]*schemas.SellerCabinet) map[string]*schemas.SellerCabinet {
	parts := map[string][]*schemas.SellerCabinet{}
	for k, c := range table {
		s := offers.CabinetSeller(k)
		parts[s] = append(parts[s], c)
	}
	out := make(map[string]*schemas.SellerCabinet, len(parts))
	for s, ps := range parts {
		out[s] = Sum(s, ps...)
	}
	return out
}

// Recount returns every seller's cabinet counted from scratch over offer
// records (deleted ones included: their sales still count). Applied is
// left empty. It is what Apply over the log must agree with.
func Recount(records []*schemas.OfferRecord) map[string]*schemas.SellerCabinet {
	out := map[string]*schemas.SellerCabinet{}
	for _, r := range records {
		c := out[r.Offer.SellerID]
		if c == nil {
			c = Empty(r.Offer.SellerID)
			out[r.Offer.SellerID] = c
		}
		s := offers.SummaryOf(r)
		add(c, s, +1)
		if s.Sold {
			c.Sold++
			c.MoneyEarned = AddMoney(c.MoneyEarned, s.SoldPrice)
		}
	}
	return out
}

// Equal reports whether two cabinets hold the same counts, Applied aside,
// and if not, how they differ.
func Equal(a, b *schemas.SellerCabinet) (bool, string) {
	for _, p := range offers.Presets {
		if a.Presets.Get(p) != b.Presets.Get(p) {
			return false, fmt.Sprintf("%s: preset %s: %d != %d", a.SellerID, p, a.Presets.Get(p), b.Presets.Get(p))
		}
	}
	x := [...]int64{a.Active, a.Expired, a.Banned, a.Sold, a.MoneyEarned}
	y := [...]int64{b.Active, b.Expired, b.Banned, b.Sold, b.MoneyEarned}
	if a.SellerID != b.SellerID || x != y {
		return false, fmt.Sprintf("%s %v != %s %v (active, expired, banned, sold, money earned)", a.SellerID, x, b.SellerID, y)
	}
	return true, ""
}

// Metrics of the cabinet.
type Metrics struct {
	Changes     *metrics.CounterVec // by outcome: applied, repeated
	DeadLetters *metrics.Counter
}

// NewMetrics registers the cabinet's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Changes:     r.Counter("offerlog_cabinet_changes_total", "Cabinet changes by outcome (applied, or repeated and skipped).", "outcome"),
		DeadLetters: r.Counter("offerlog_cabinet_dead_letters_total", "Undecodable cabinet changes sent to offers.dead.").With(),
	}
}

// Graph returns the cabinet's group graph.
func Graph(m *Metrics) *table.Graph {
	return &table.Graph{
		Group: Group, Codec: TableCodec, DeadTopic: topics.OffersDead,
		Inputs: []table.Input{{Topic: topics.CabinetChanges, Callback: func(ctx table.Context, data []byte) {
			var ch schemas.CabinetChange
			err := schemas.CabinetChanges.Decode(data, &ch)
			if err == nil && ch.SellerID != offers.CabinetSeller(ctx.Key()) {
				err = fmt.Errorf("seller %q is not the one of the message key %q", ch.SellerID, ctx.Key())
			}
			if err != nil {
				ctx.Emit(topics.OffersDead, ctx.Key(), streams.NewDeadLetter(Group, ctx.Topic(),
					ctx.Partition(), ctx.Offset(), []byte(ctx.Key()), data, ctx.Timestamp(), err.Error()))
				m.DeadLetters.Inc()
				return
			}
			cur := table.TableValue[schemas.SellerCabinet](ctx, topics.OffersDead)
			next, applied := Apply(cur, &ch)
			if !applied {
				// Seen again: after a crash of this group, or re-emitted by
				// the aggregate after a crash of its own.
				m.Changes.With("repeated").Inc()
				table.Reassert(ctx, cur)
				return
			}
			ctx.SetValue(next)
			m.Changes.With("applied").Inc()
		}}},
		Outputs: []table.Output{{Topic: topics.OffersDead, Codec: streams.Avro[schemas.DeadLetter]{C: schemas.DeadLetters}}},
	}
}

// PresetsCodec is the codec of cabinet.presets values, for views.
var PresetsCodec streams.Codec = streams.Table[schemas.PresetEntry]{C: schemas.PresetEntries}
