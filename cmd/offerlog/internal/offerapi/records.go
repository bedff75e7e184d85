package offerapi

import (
	"context"
	"fmt"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams/table"
)

// Records reads the offer aggregate's records (its table, offers-table) by
// offer id. A record is as fresh as the reader's copy of the table: it
// follows the table's changelog, so it shows a write some milliseconds after
// the aggregate made it. Readers that must see a version they were given
// wait for it (Service.Offer's minVersion).
type Records interface {
	// Records returns the records of ids the table holds, by id.
	Records(ctx context.Context, ids []string) (map[string]*schemas.OfferRecord, error)
}

// WithArchive returns Records that read active (offers-table) and, for
// the ids it does not hold, archive (offers.archive): an archived offer
// is read by its id as before, marked Archived.
func WithArchive(active, archive Records) Records { return archived{active, archive} }

type archived struct{ active, archive Records }

// changer is Records that say when they moved on (a view's: Changed), so
// that a wait for a record looks again at once rather than on its next
// tick.
type changer interface{ Changed() <-chan struct{} }

// Changed is the active records' change signal, if they have one; else a
// channel never closed (nil).
func (a archived) Changed() <-chan struct{} {
	if c, ok := a.active.(changer); ok {
		return c.Changed()
	}
	return nil
}

func (a archived) Records(ctx context.Context, ids []string) (map[string]*schemas.OfferRecord, error) {
	out, err := a.active.Records(ctx, ids)
	if err != nil || len(out) == len(ids) {
		return out, err
	}
	var rest []string
	for _, id := range ids {
		if out[id] == nil {
			rest = append(rest, id)
		}
	}
	old, err := a.archive.Records(ctx, rest)
	if err != nil {
		return nil, fmt.Errorf("the archive: %w", err)
	}
	for id, r := range old {
		out[id] = r
	}
	return out, nil
}

// recordOf returns the record of id, nil if the table holds none.
func recordOf(ctx context.Context, r Records, id string) (*schemas.OfferRecord, error) {
	m, err := r.Records(ctx, []string{id})
	return m[id], err
}

// ViewRecords reads records from a view of the whole table: every
// partition, in this process. Right for one process that runs everything
// (offerlog dev); a fleet of API processes reads through the serving cache
// (CacheRecords) instead.
func ViewRecords(v *table.View) Records { return viewRecords{v} }

type viewRecords struct{ v *table.View }

// Changed is the view's (table.View.Changed).
func (r viewRecords) Changed() <-chan struct{} { return r.v.Changed() }

func (r viewRecords) Records(_ context.Context, ids []string) (map[string]*schemas.OfferRecord, error) {
	out := make(map[string]*schemas.OfferRecord, len(ids))
	for _, id := range ids {
		v, err := r.v.Get(id)
		if err != nil {
			return nil, err
		}
		if rec, ok := v.(*schemas.OfferRecord); ok && rec != nil {
			out[id] = rec
		}
	}
	return out, nil
}

// CacheRecords reads records through the serving cache: the client sends
// each id to the replicas of its shard of offers-table (its Table should be
// offers-table) and the record is decoded here. The process holds no copy
// of the table.
func CacheRecords(c *serving.Client) Records { return cacheRecords{c} }

type cacheRecords struct{ c *serving.Client }

func (r cacheRecords) Records(ctx context.Context, ids []string) (map[string]*schemas.OfferRecord, error) {
	values, err := r.c.Get(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*schemas.OfferRecord, len(values))
	for id, data := range values {
		v, err := offers.TableCodec.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("the cache's record of %s: %w", id, err)
		}
		if rec, ok := v.(*schemas.OfferRecord); ok && rec != nil {
			out[id] = rec
		}
	}
	return out, nil
}
