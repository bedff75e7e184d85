// Package ydbsink keeps the YDB tables of the seeds equal to the event log:
// a consumer of one table topic (the registry, the offer aggregate, the
// cabinet's counts and preset lists, the feed index) that maps each record
// to rows, writes them in batches, replaces a row only with a newer version
// (so redeliveries and replays change nothing), and commits its offsets
// only after YDB confirmed the batch.
package ydbsink

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// Column is a column of a table, with its YQL type (Utf8, String, Int32,
// Int64, Uint32, Uint64, Timestamp).
type Column struct{ Name, Type string }

// Table is a YDB table a source writes.
type Table struct {
	Name    string
	Columns []Column
	Key     []string
	// Version lists the columns that order a row's versions, compared in
	// order: a row replaces only an older one. Empty: the log's order is
	// the only order (every write replaces).
	Version []string
}

// Row is a row to upsert into Table, or with Delete its key to delete.
type Row struct {
	Table  string
	Values map[string]any // int32, int64, uint32, uint64, string, []byte, time.Time
	Delete bool
}

// Mapping turns one record of a source topic into rows. A nil value is the
// source's deletion of key.
type Mapping func(key string, value []byte) ([]Row, error)

// Source is what the sink knows of one topic.
type Source struct {
	Topic  string
	Tables []Table
	Map    Mapping
}

// Tables of the seeds (indexing.md's registry, gost.md's offer, presets,
// counters and feed).
var (
	RegistryTable = Table{Name: "registry",
		Columns: []Column{{"hash", "Uint64"}, {"client", "Utf8"}, {"pk", "Utf8"}, {"version", "Int64"}, {"epoch", "Int64"},
			{"status", "Int32"}, {"modify_timestamp", "Timestamp"}, {"ttl", "Timestamp"}, {"document", "String"}},
		Key: []string{"hash", "client", "pk"}, Version: []string{"epoch", "version", "modify_timestamp"}}
	OfferTable = Table{Name: "offer",
		Columns: []Column{{"seller_id", "Utf8"}, {"id", "Utf8"}, {"kind", "Utf8"}, {"version", "Int64"}, {"data", "String"}},
		Key:     []string{"seller_id", "id", "kind"}, Version: []string{"version"}}
	// OfferArchiveTable holds the archived offers (offers.archive), as
	// OfferTable holds the others: an offer archived leaves offer for it.
	OfferArchiveTable = Table{Name: "offer_archive",
		Columns: []Column{{"seller_id", "Utf8"}, {"id", "Utf8"}, {"kind", "Utf8"}, {"version", "Int64"}, {"data", "String"}},
		Key:     []string{"seller_id", "id", "kind"}, Version: []string{"version"}}
	PresetsTable = Table{Name: "user_offer_presets",
		Columns: []Column{{"seller_id", "Utf8"}, {"preset_id", "Int32"}, {"create_time", "Utf8"}, {"offer_id", "Utf8"}},
		Key:     []string{"seller_id", "preset_id", "create_time", "offer_id"}}
	// PresetCountsTable has the seed's columns and seq_no, as
	// user_total_counters has: a seller's cabinet is spread over
	// offers.CabinetSpread keys, each a row; a seller's count of a preset
	// is the sum of its rows (the seed's key, seller and preset, cannot
	// hold parts that change independently).
	PresetCountsTable = Table{Name: "user_offer_presets_count",
		Columns: []Column{{"seller_id", "Utf8"}, {"preset_id", "Int32"}, {"seq_no", "Int32"}, {"counter", "Int64"}, {"version", "Int64"}},
		Key:     []string{"seller_id", "preset_id", "seq_no"}, Version: []string{"version"}}
	TotalCountersTable = Table{Name: "user_total_counters",
		Columns: []Column{{"shard_id", "Uint32"}, {"seller_id", "Utf8"}, {"counter_id", "Utf8"}, {"seq_no", "Int32"},
			{"counter_value", "Int64"}, {"version", "Int64"}},
		Key: []string{"shard_id", "seller_id", "counter_id", "seq_no"}, Version: []string{"version"}}
	FeedTable = Table{Name: "feed",
		Columns: []Column{{"seller_id", "Utf8"}, {"external_id", "Utf8"}, {"offer_id", "Utf8"}, {"task_id", "Int64"}},
		Key:     []string{"seller_id", "external_id"}, Version: []string{"task_id"}}
)

// Sources lists the topics the sink can follow, by topic.
var Sources = map[string]Source{
	string(topics.RegistryTable):  {Topic: string(topics.RegistryTable), Tables: []Table{RegistryTable}, Map: registryRows},
	string(topics.OffersTable):    {Topic: string(topics.OffersTable), Tables: []Table{OfferTable}, Map: offerRows},
	string(topics.OffersArchive):  {Topic: string(topics.OffersArchive), Tables: []Table{OfferArchiveTable}, Map: archiveRows},
	string(topics.CabinetPresets): {Topic: string(topics.CabinetPresets), Tables: []Table{PresetsTable}, Map: presetRows},
	string(topics.CabinetTable):   {Topic: string(topics.CabinetTable), Tables: []Table{PresetCountsTable, TotalCountersTable}, Map: cabinetRows},
	string(topics.FeedsIndex):     {Topic: string(topics.FeedsIndex), Tables: []Table{FeedTable}, Map: feedRows},
}

// SourceNames returns the topics of Sources, sorted.
func SourceNames() []string {
	out := make([]string, 0, len(Sources))
	for t := range Sources {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Registry statuses in the registry table (indexing.md: alive or a grave).
const (
	StatusLive      int32 = 0
	StatusTombstone int32 = 1
)

// farFuture is the ttl of a row that does not expire.
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// KeyHash spreads keys over tablets (the registry's hash column).
func KeyHash(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

func registryRows(key string, value []byte) ([]Row, error) {
	client, pk, ok := strings.Cut(key, "/")
	if !ok {
		return nil, fmt.Errorf("registry key %q is not client/pk", key)
	}
	keyValues := map[string]any{"hash": KeyHash(key), "client": client, "pk": pk}
	if value == nil {
		return []Row{{Table: RegistryTable.Name, Values: keyValues, Delete: true}}, nil
	}
	var r schemas.RegistryRecord
	if err := schemas.RegistryRecords.Decode(value, &r); err != nil {
		return nil, err
	}
	status, ttl := StatusLive, farFuture
	if r.Status == schemas.StatusTombstone {
		status = StatusTombstone
	}
	if r.ExpiresAt != nil {
		ttl = *r.ExpiresAt
	}
	keyValues["version"], keyValues["epoch"], keyValues["status"] = r.Version, r.Epoch, status
	keyValues["modify_timestamp"], keyValues["ttl"], keyValues["document"] = r.Timestamp, ttl, value
	return []Row{{Table: RegistryTable.Name, Values: keyValues}}, nil
}

// Offer kinds of the offer table: one row per part of the aggregate, as
// gost.md splits them to keep writers of different parts apart.
const (
	KindOffer      = "offer"
	KindModeration = "moderation"
	KindBilling    = "billing"
)

// offerRows maps a record of offers-table to the rows of its parts in
// offer. A record marked archived (the last one before the aggregate's
// tombstone, which names no seller) deletes them: the offer lives in
// offer_archive from then on (archiveRows). A partition's records come in
// order, so no older version of the offer comes after.
func offerRows(key string, value []byte) ([]Row, error) {
	if value == nil {
		return nil, nil // the aggregate's tombstone of an archived offer: its rows went with its archived record
	}
	return partRows(OfferTable, key, value, true)
}

// archiveRows maps a record of offers.archive to the rows of its parts in
// offer_archive.
func archiveRows(key string, value []byte) ([]Row, error) {
	if value == nil {
		return nil, nil // the archive's records are never removed, only aged out by retention
	}
	return partRows(OfferArchiveTable, key, value, false)
}

// partRows returns the rows of the parts of an offer's record in t (gost.md
// splits them, to keep writers of different parts apart), or with leave
// and a record marked archived, their deletion.
func partRows(t Table, key string, value []byte, leave bool) ([]Row, error) {
	var r schemas.OfferRecord
	if err := schemas.OfferRecords.Decode(value, &r); err != nil {
		return nil, err
	}
	parts := []struct {
		kind string
		v    any
	}{{KindOffer, r.Offer}, {KindModeration, r.Moderation}, {KindBilling, r.Billing}}
	rows := make([]Row, 0, len(parts))
	for _, p := range parts {
		if leave && r.Archived {
			rows = append(rows, Row{Table: t.Name, Delete: true, Values: map[string]any{"seller_id": r.Offer.SellerID, "id": key, "kind": p.kind}})
			continue
		}
		data, err := json.Marshal(p.v)
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{Table: t.Name, Values: map[string]any{
			"seller_id": r.Offer.SellerID, "id": key, "kind": p.kind, "version": r.Version, "data": data}})
	}
	return rows, nil
}

// PresetID is the preset_id of a preset: its place in offers.Presets.
func PresetID(preset string) (int32, bool) {
	i := slices.Index(offers.Presets, preset)
	return int32(i), i >= 0
}

func presetRows(key string, value []byte) ([]Row, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return nil, fmt.Errorf("preset key %q is not seller/preset/rank/offer", key)
	}
	id, ok := PresetID(parts[1])
	if !ok {
		return nil, fmt.Errorf("preset key %q: unknown preset", key)
	}
	rank, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("preset key %q: rank: %w", key, err)
	}
	created := time.UnixMilli(offers.FarRank - rank).UTC().Format(time.RFC3339Nano)
	return []Row{{Table: PresetsTable.Name, Delete: value == nil, Values: map[string]any{
		"seller_id": parts[0], "preset_id": id, "create_time": created, "offer_id": parts[3]}}}, nil
}

// Counter ids of user_total_counters (gost.md).
var counterIDs = []string{"Active", "Expired", "Banned", "Sold", "MoneyEarned"}

// CounterShards is the number of shard_id values of user_total_counters.
const CounterShards = 64

func cabinetRows(key string, value []byte) ([]Row, error) {
	if value == nil {
		return nil, nil // cabinets are never removed
	}
	var c schemas.SellerCabinet
	if err := schemas.SellerCabinets.Decode(value, &c); err != nil {
		return nil, err
	}
	// The cabinet's version: the sum of the source offsets it applied,
	// which grows with every change and is the same after a replay.
	var version int64
	for _, a := range c.Applied {
		version += a.Count
	}
	seller, seq, err := cabinetPart(key, &c)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, p := range offers.Presets {
		id, _ := PresetID(p)
		rows = append(rows, Row{Table: PresetCountsTable.Name, Values: map[string]any{
			"seller_id": seller, "preset_id": id, "seq_no": seq, "counter": c.Presets.Get(p), "version": version}})
	}
	shard := uint32(KeyHash(seller) % CounterShards) // every row of a seller in one shard
	for i, v := range []int64{c.Active, c.Expired, c.Banned, c.Sold, c.MoneyEarned} {
		rows = append(rows, Row{Table: TotalCountersTable.Name, Values: map[string]any{
			"shard_id": shard, "seller_id": seller, "counter_id": counterIDs[i], "seq_no": seq,
			"counter_value": v, "version": version}})
	}
	return rows, nil
}

// UnspreadSeqNo is the seq_no of the counter rows of a cabinet written
// before it was spread, under the bare seller id (before 0.5.0): the
// spread ones are 0 to offers.CabinetSpread-1, as the seed's.
const UnspreadSeqNo = int32(-1)

// cabinetPart returns the seller and the seq_no of the cabinet-table key
// of cabinet c: seller/n (offers.CabinetKey) is seq_no n, the bare seller
// id UnspreadSeqNo. The seller is the cabinet's own.
func cabinetPart(key string, c *schemas.SellerCabinet) (string, int32, error) {
	if key == c.SellerID {
		return c.SellerID, UnspreadSeqNo, nil
	}
	if rest, ok := strings.CutPrefix(key, c.SellerID+"/"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 && n < offers.CabinetSpread {
			return c.SellerID, int32(n), nil
		}
	}
	return "", 0, fmt.Errorf("cabinet key %q is not seller %q's (seller/n, n < %d)", key, c.SellerID, offers.CabinetSpread)
}

func feedRows(key string, value []byte) ([]Row, error) {
	seller, ext, ok := strings.Cut(key, "/")
	if !ok {
		return nil, fmt.Errorf("feed key %q is not seller/external_id", key)
	}
	if value == nil {
		return []Row{{Table: FeedTable.Name, Delete: true, Values: map[string]any{"seller_id": seller, "external_id": ext}}}, nil
	}
	var e schemas.FeedEntry
	if err := schemas.FeedEntries.Decode(value, &e); err != nil {
		return nil, err
	}
	return []Row{{Table: FeedTable.Name, Values: map[string]any{
		"seller_id": seller, "external_id": ext, "offer_id": e.OfferID, "task_id": e.TaskID}}}, nil
}
