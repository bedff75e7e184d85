package schemas

import "time"

// Names of the numerator's schemas.
const (
	OfferSeenName        = "offerlog.numerator.OfferSeen"
	GenerationMarkerName = "offerlog.numerator.GenerationMarker"
	NumeratorEntryName   = "offerlog.numerator.NumeratorEntry"
	AssignmentName       = "offerlog.numerator.Assignment"
	NumeratorStateName   = "offerlog.numerator.NumeratorState"
)

// MarkerAction is what a GenerationMarker asks the sealer.
type MarkerAction string

// Marker actions.
const (
	MarkerSeal    MarkerAction = "SEAL"
	MarkerRebuild MarkerAction = "REBUILD"
	MarkerReshard MarkerAction = "RESHARD"
)

// OfferSeen is an offer key seen in a generation (numerator.offers).
type OfferSeen struct {
	BusinessID  int64  `avro:"business_id"`
	OfferID     string `avro:"offer_id"`
	ShopID      int64  `avro:"shop_id"`
	WarehouseID int64  `avro:"warehouse_id"`
	Generation  int64  `avro:"generation"`
}

// GenerationMarker is a command to the sealer (numerator.generations).
type GenerationMarker struct {
	Action     MarkerAction `avro:"action"`
	Generation int64        `avro:"generation"`
	Scheme     int64        `avro:"scheme"`
}

// NumeratorEntry is the numerator's record of a key (numerator-table).
type NumeratorEntry struct {
	BusinessID  int64  `avro:"business_id"`
	OfferID     string `avro:"offer_id"`
	ShopID      int64  `avro:"shop_id"`
	WarehouseID int64  `avro:"warehouse_id"`
	Shard       int32  `avro:"shard"`
	DocID       int64  `avro:"doc_id"`
	LastSeen    int64  `avro:"last_seen"`
	Version     string `avro:"version"`
	// SeenBefore is the generation the key was seen in before LastSeen (0:
	// none), for a seal of a generation before LastSeen.
	SeenBefore int64 `avro:"seen_before"`
	// AssignedIn is the generation of the state that gave the current
	// assignment (0: unknown).
	AssignedIn int64 `avro:"assigned_in"`
	// History are the assignments the key held before, oldest first.
	History []PastAssignment `avro:"history"`
}

// PastAssignment is an assignment a key held before its current one.
type PastAssignment struct {
	Shard      int32  `avro:"shard"`
	DocID      int64  `avro:"doc_id"`
	Version    string `avro:"version"`
	Generation int64  `avro:"generation"`
}

// Assignment is a key's (shard, doc_id) under a version (numerator.results,
// numerator.assignments).
type Assignment struct {
	BusinessID  int64  `avro:"business_id"`
	OfferID     string `avro:"offer_id"`
	ShopID      int64  `avro:"shop_id"`
	WarehouseID int64  `avro:"warehouse_id"`
	Shard       int32  `avro:"shard"`
	DocID       int64  `avro:"doc_id"`
	Version     string `avro:"version"`
	Generation  int64  `avro:"generation"`
	// History are the assignments the key held before this one, oldest
	// first (on numerator.assignments; none on numerator.results).
	History []PastAssignment `avro:"history"`
}

// ShardSummary is one shard's line of a NumeratorState.
type ShardSummary struct {
	Shard    int32 `avro:"shard"`
	Live     int64 `avro:"live"`
	MaxDocID int64 `avro:"max_doc_id"`
	Free     int64 `avro:"free"`
	Expired  int64 `avro:"expired"`
	New      int64 `avro:"new"`
	// HighDocID is the largest doc_id given in the shard since its last
	// renumbering, held now or not (-1: none, or a state of an older
	// release).
	HighDocID int64 `avro:"high_doc_id"`
}

// NumeratorState is the state after a seal, rebuild or reshard
// (numerator.states).
type NumeratorState struct {
	Version    string         `avro:"version"`
	Generation int64          `avro:"generation"`
	Scheme     int64          `avro:"scheme"`
	Rebuilt    bool           `avro:"rebuilt"`
	Shards     []ShardSummary `avro:"shards"`
	Holder     string         `avro:"holder"`
	Ticket     int64          `avro:"ticket"`
	// MarkerPartition and MarkerOffset are where the marker this state
	// carries out is on numerator.generations (-1: unknown): a marker at
	// or before them is done, so one delivered again changes nothing.
	MarkerPartition int32     `avro:"marker_partition"`
	MarkerOffset    int64     `avro:"marker_offset"`
	SealedAt        time.Time `avro:"sealed_at"`
	// LastReuse is the G of the last seal that gave a doc_id another key
	// held before to a new key (numerator.CompatibleWith).
	LastReuse int64 `avro:"last_reuse"`
	// Invalid, when not empty, says why the build under Ticket was
	// refused: it left no decision applied, and this record is no state.
	Invalid string `avro:"invalid"`
}

// Codecs of the numerator's schemas. Each is safe for concurrent use.
var (
	OffersSeen        = codecFor[OfferSeen](OfferSeenName)
	GenerationMarkers = codecFor[GenerationMarker](GenerationMarkerName)
	NumeratorEntries  = codecFor[NumeratorEntry](NumeratorEntryName)
	Assignments       = codecFor[Assignment](AssignmentName)
	NumeratorStates   = codecFor[NumeratorState](NumeratorStateName)
)
