package schemas

import "time"

// Names of the offer storage's schemas.
const (
	OfferRecordName       = "offerlog.offers.OfferRecord"
	OfferCommandName      = "offerlog.offers.OfferCommand"
	OfferEventName        = "offerlog.offers.OfferEvent"
	OfferResultName       = "offerlog.offers.OfferResult"
	CabinetChangeName     = "offerlog.offers.CabinetChange"
	SellerCabinetName     = "offerlog.offers.SellerCabinet"
	PresetEntryName       = "offerlog.offers.PresetEntry"
	FeedItemName          = "offerlog.offers.FeedItem"
	FeedEntryName         = "offerlog.offers.FeedEntry"
	IDClaimName           = "offerlog.offers.IDClaim"
	PhotoRequestName      = "offerlog.offers.PhotoRequest"
	PhotoResultName       = "offerlog.offers.PhotoResult"
	ModerationOpinionName = "offerlog.offers.ModerationOpinion"
	DraftRecordName       = "offerlog.offers.DraftRecord"
	DraftCommandName      = "offerlog.offers.DraftCommand"
	DraftResultName       = "offerlog.offers.DraftResult"
	QueueItemName         = "offerlog.scheduler.QueueItem"
	StageTimerName        = "offerlog.scheduler.StageTimer"
	StageEffectName       = "offerlog.scheduler.StageEffect"
)

// OfferStatus is where an offer is in its life, as its seller sees it. A ban
// is moderation's and is kept apart (OfferRecord.Moderation).
type OfferStatus string

// Offer statuses.
const (
	OfferActive   OfferStatus = "ACTIVE"
	OfferInactive OfferStatus = "INACTIVE"
	OfferExpired  OfferStatus = "EXPIRED"
	OfferSold     OfferStatus = "SOLD"
	OfferDeleted  OfferStatus = "DELETED"
)

// PhotoStatus is where a photo is in its processing.
type PhotoStatus string

// Photo statuses.
const (
	PhotoPending PhotoStatus = "PENDING"
	PhotoReady   PhotoStatus = "READY"
	PhotoFailed  PhotoStatus = "FAILED"
)

// Photo is one photo of an offer: the seller's URL and, once processed, the
// URL it is served from.
type Photo struct {
	SourceURL string      `avro:"source_url" json:"source_url"`
	URL       string      `avro:"url" json:"url,omitempty"`
	Status    PhotoStatus `avro:"status" json:"status,omitempty"`
	Error     string      `avro:"error" json:"error,omitempty"`
}

// Offer is an offer as sellers write it and readers get it.
type Offer struct {
	ID          string      `avro:"id" json:"id"`
	SellerID    string      `avro:"seller_id" json:"seller_id"`
	Category    string      `avro:"category" json:"category"`
	Title       string      `avro:"title" json:"title"`
	Description string      `avro:"description" json:"description,omitempty"`
	Price       *int64      `avro:"price" json:"price,omitempty"`
	Currency    string      `avro:"currency" json:"currency,omitempty"`
	Attributes  Attributes  `avro:"attributes" json:"attributes,omitempty"`
	Photos      []Photo     `avro:"photos" json:"photos,omitempty"`
	Status      OfferStatus `avro:"status" json:"status"`
	ExternalID  string      `avro:"external_id" json:"external_id,omitempty"`
	CreatedAt   time.Time   `avro:"created_at" json:"created_at"`
	UpdatedAt   time.Time   `avro:"updated_at" json:"updated_at"`
	// ExposedMs and ExposedSince are the offer's exposure, kept by the
	// aggregate from the log's time (a client's values are ignored):
	// the milliseconds it was exposed before its current exposure, and
	// since when (Unix ms) it is exposed now, 0 when it is not, and
	// ExposureUnknown in a record written before exposure was kept.
	ExposedMs    int64 `avro:"exposed_ms" json:"exposed_ms"`
	ExposedSince int64 `avro:"exposed_since" json:"exposed_since"`
}

// ExposureUnknown is Offer.ExposedSince of an offer written before
// exposure was kept: an ACTIVE one counts as exposed since its creation.
const ExposureUnknown = -1

// Exposure returns how long o has been exposed at (Unix ms): the time it
// was ACTIVE and not banned (gost-scheduler.md: "180 дней экспозиции"),
// and whether it is exposed now.
func (o *Offer) Exposure(at int64) (ms int64, now bool) {
	since := o.exposedSince()
	if since <= 0 {
		return o.ExposedMs, false
	}
	return o.ExposedMs + max(0, at-since), true
}

// exposedSince is ExposedSince, read for a record written before exposure
// was kept as its creation if it is ACTIVE (0: not exposed now).
func (o *Offer) exposedSince() int64 {
	if o.ExposedSince != ExposureUnknown {
		return o.ExposedSince
	}
	if o.Status != OfferActive {
		return 0
	}
	return o.CreatedAt.UnixMilli()
}

// Expose carries o's exposure from before, the offer's previous version
// (nil: none), to at (Unix ms, the time of the change): an offer that
// stops being exposed (shown says whether it is now) adds the time of its
// exposure, one that starts is exposed since at.
func (o *Offer) Expose(before *Offer, shown bool, at int64) {
	var ms int64
	var was bool
	if before != nil {
		ms, was = before.Exposure(at)
	}
	switch {
	case shown && was:
		o.ExposedMs, o.ExposedSince = before.ExposedMs, before.exposedSince()
	case shown:
		o.ExposedMs, o.ExposedSince = ms, max(at, 1)
	default:
		o.ExposedMs, o.ExposedSince = ms, 0
	}
}

// Summary is what the seller cabinet counts of one version of an offer.
type Summary struct {
	Presets   []string `avro:"presets"`
	Sold      bool     `avro:"sold"`
	SoldPrice int64    `avro:"sold_price"`
}

// Moderation is moderation's part of an offer: a ban and its reasons.
type Moderation struct {
	Banned    bool      `avro:"banned"`
	Reasons   []string  `avro:"reasons"`
	UpdatedAt time.Time `avro:"updated_at"`
}

// Billing is billing's part of an offer: its tariff and its first sale.
type Billing struct {
	Tariff    string `avro:"tariff"`
	Sold      bool   `avro:"sold"`
	SoldPrice int64  `avro:"sold_price"`
}

// StageState is a stage's part of an offer: its private state (opaque bytes
// of a type the stage names) with the version compare-and-set works on,
// whether the offer is in the stage's queue, and its pending timer (Unix
// ms, 0: none). A record keeps its states sorted by stage.
type StageState struct {
	Stage   string `avro:"stage" json:"stage"`
	TypeURL string `avro:"type_url" json:"type_url,omitempty"`
	Value   []byte `avro:"value" json:"value,omitempty"`
	Version int64  `avro:"version" json:"version"`
	Queued  bool   `avro:"queued" json:"queued,omitempty"`
	TimerAt int64  `avro:"timer_at" json:"timer_at,omitempty"`
	// Again: while the stage (with patches) was queued, an outside change
	// it is interested in came: its result queues it once more.
	Again bool `avro:"again" json:"again,omitempty"`
	// Waiting: an exclusive stage asked for the offer while another
	// exclusive stage held it (was queued); it is queued once that one's
	// result is in.
	Waiting bool `avro:"waiting" json:"waiting,omitempty"`
}

// RecentResult is the result given to one input, remembered so that a
// redelivery after a crash gets the same answer.
type RecentResult struct {
	Topic     string `avro:"topic"`
	Partition int32  `avro:"partition"`
	Offset    int64  `avro:"offset"`
	Outcome   string `avro:"outcome"`
	Reason    string `avro:"reason"`
	Field     string `avro:"field"`
	Version   int64  `avro:"version"`
}

// OfferRecord is the offer aggregate's value of one offer (offers-table).
type OfferRecord struct {
	Offer      Offer        `avro:"offer"`
	Version    int64        `avro:"version"`
	Moderation Moderation   `avro:"moderation"`
	Billing    Billing      `avro:"billing"`
	Stages     []StageState `avro:"stages"`
	DraftOwner string       `avro:"draft_owner"`
	DraftID    string       `avro:"draft_id"`
	FeedTask   int64        `avro:"feed_task"`
	// Summary is the cabinet's view of this version, Previous of the one
	// before: together they let a redelivered input re-emit its change.
	Summary  Summary `avro:"summary"`
	Previous Summary `avro:"previous"`
	// Source names the input that wrote this version.
	SourceTopic     string         `avro:"source_topic"`
	SourcePartition int32          `avro:"source_partition"`
	SourceOffset    int64          `avro:"source_offset"`
	Recent          []RecentResult `avro:"recent"`
	// ByStage names the stage whose result wrote this version ("": an
	// outside change); StageDepth counts the stage results in a row since
	// the last outside change (gost-scheduler.md's chain reactions).
	ByStage    string `avro:"by_stage"`
	StageDepth int32  `avro:"stage_depth"`
	// FieldVersions are the versions that last changed each field.
	FieldVersions []FieldVersion `avro:"field_versions"`
	// ArchiveAt is when (Unix ms) the offer is due to leave offers-table
	// for offers.archive: set when it becomes DELETED, SOLD or EXPIRED, 0
	// while it is not due to. Archived marks a record on its way there
	// (read-only from then on) and every record of offers.archive.
	ArchiveAt int64 `avro:"archive_at"`
	Archived  bool  `avro:"archived"`
}

// FieldVersion is the version that last changed one field of an offer.
type FieldVersion struct {
	Field   string `avro:"field"`
	Version int64  `avro:"version"`
}

// CommandKind is what an OfferCommand asks.
type CommandKind string

// Command kinds.
const (
	CommandCreate     CommandKind = "CREATE"
	CommandUpdate     CommandKind = "UPDATE"
	CommandDelete     CommandKind = "DELETE"
	CommandFeedUpsert CommandKind = "FEED_UPSERT"
	CommandFeedDelete CommandKind = "FEED_DELETE"
	CommandPhoto      CommandKind = "PHOTO"
	CommandModeration CommandKind = "MODERATION"
	CommandEnqueue    CommandKind = "ENQUEUE"
	CommandResult     CommandKind = "STAGE_RESULT"
	CommandSetTimer   CommandKind = "SET_TIMER"
	CommandStateCAS   CommandKind = "STATE_CAS"
	// CommandArchive moves an offer from offers-table to offers.archive;
	// the aggregate writes it itself, carrying the offer's last record.
	CommandArchive CommandKind = "ARCHIVE"
	// CommandArmArchive gives an offer done with before archiving existed
	// (deleted, sold or expired, without an archive time) its archive
	// time, from the command's time (offerlog archive arm).
	CommandArmArchive CommandKind = "ARM_ARCHIVE"
)

// OfferCommand is a write to one offer (offers.commands).
type OfferCommand struct {
	Kind            CommandKind `avro:"kind"`
	OfferID         string      `avro:"offer_id"`
	SellerID        string      `avro:"seller_id"`
	ExpectedVersion int64       `avro:"expected_version"`
	Offer           *Offer      `avro:"offer"`
	DraftOwner      string      `avro:"draft_owner"`
	DraftID         string      `avro:"draft_id"`
	TaskID          int64       `avro:"task_id"`
	ExternalID      string      `avro:"external_id"`
	// Photo and Opinion are answers of the photo service and moderation,
	// brought into the command stream (kinds PHOTO and MODERATION) so that
	// the aggregate has one ordered input and a replay decides as the
	// first run did.
	Photo   *PhotoResult       `avro:"photo"`
	Opinion *ModerationOpinion `avro:"opinion"`
	// Stage commands (ENQUEUE, STAGE_RESULT, SET_TIMER, STATE_CAS): the
	// stage, its new state, its timer (Unix ms), the offer version a
	// result was computed from, the low-priority queue, and the due time
	// of the timer an ENQUEUE fires.
	Stage       string      `avro:"stage"`
	State       *StageState `avro:"state"`
	TimerAt     int64       `avro:"timer_at"`
	ReadVersion int64       `avro:"read_version"`
	Low         bool        `avro:"low"`
	FiredAt     int64       `avro:"fired_at"`
	// Hop, on a CREATE of a published draft, counts the ids of the draft's
	// chain found taken before this one (offers.NextID).
	Hop int32 `avro:"hop"`
	// Failed, on a STAGE_RESULT, says why the stage's call was given up
	// or its result refused: the offer leaves the stage's queue, and
	// nothing else changes (no state, no version, no effect).
	Failed string `avro:"failed"`
	// Patch, on a STAGE_RESULT, makes Offer a patch of PatchFields: they
	// are applied to the offer's current version unless one of them
	// changed since ReadVersion (then it is a conflict, as a whole result
	// of an older version always is).
	Patch       bool     `avro:"patch"`
	PatchFields []string `avro:"patch_fields"`
	// Record, on an ARCHIVE, is the offer's last record (offers-table's
	// encoding), the one offers.archive keeps.
	Record []byte `avro:"record"`
}

// OfferEvent is the full offer after a change (offers.events).
type OfferEvent struct {
	Offer      Offer     `avro:"offer"`
	Version    int64     `avro:"version"`
	Change     string    `avro:"change"`
	Banned     bool      `avro:"banned"`
	BanReasons []string  `avro:"ban_reasons"`
	At         time.Time `avro:"at"`
	// Stages are the stages' parts, for the scheduler's router.
	Stages []StageState `avro:"stages"`
	// Changed names the fields the change touched.
	Changed []string `avro:"changed"`
	// ByStage and StageDepth are the record's (OfferRecord.ByStage).
	ByStage    string `avro:"by_stage"`
	StageDepth int32  `avro:"stage_depth"`
}

// Outcome is the aggregate's answer to a command.
type Outcome string

// Outcomes of commands.
const (
	OutcomeOK        Outcome = "OK"
	OutcomeConflict  Outcome = "CONFLICT"
	OutcomeNotFound  Outcome = "NOT_FOUND"
	OutcomeCollision Outcome = "COLLISION"
	OutcomeInvalid   Outcome = "INVALID"
	OutcomeIgnored   Outcome = "IGNORED"
)

// OfferResult is the aggregate's answer to one command (offers.results).
type OfferResult struct {
	OfferID         string  `avro:"offer_id"`
	SourcePartition int32   `avro:"source_partition"`
	SourceOffset    int64   `avro:"source_offset"`
	Outcome         Outcome `avro:"outcome"`
	Reason          string  `avro:"reason"`
	Field           string  `avro:"field"`
	Version         int64   `avro:"version"`
}

// CabinetChange is one offer's move in its seller's cabinet
// (cabinet.changes). Source names the aggregate's input that caused it.
type CabinetChange struct {
	SellerID        string  `avro:"seller_id"`
	OfferID         string  `avro:"offer_id"`
	SourceTopic     string  `avro:"source_topic"`
	SourcePartition int32   `avro:"source_partition"`
	SourceOffset    int64   `avro:"source_offset"`
	Before          Summary `avro:"before"`
	After           Summary `avro:"after"`
}

// SellerCabinet is a seller's preset counts and counters (cabinet-table).
// Applied holds, per aggregate input partition ("topic/partition"), the
// last source offset applied: changes at or below it are redeliveries.
type SellerCabinet struct {
	SellerID    string `avro:"seller_id" json:"seller_id"`
	Presets     Counts `avro:"presets" json:"presets"`
	Active      int64  `avro:"active" json:"active"`
	Expired     int64  `avro:"expired" json:"expired"`
	Banned      int64  `avro:"banned" json:"banned"`
	Sold        int64  `avro:"sold" json:"sold"`
	MoneyEarned int64  `avro:"money_earned" json:"money_earned"`
	Applied     Counts `avro:"applied" json:"-"`
}

// PresetEntry is an offer's membership of a cabinet preset (cabinet.presets).
type PresetEntry struct {
	SellerID  string    `avro:"seller_id"`
	Preset    string    `avro:"preset"`
	OfferID   string    `avro:"offer_id"`
	CreatedAt time.Time `avro:"created_at"`
}

// FeedItem is one item of a bulk upload, or with End its end marker
// (feeds.ingest).
type FeedItem struct {
	SellerID   string `avro:"seller_id"`
	TaskID     int64  `avro:"task_id"`
	ExternalID string `avro:"external_id"`
	End        bool   `avro:"end"`
	Offer      *Offer `avro:"offer"`
	// Failed, on an end marker, says the upload failed: the task ends and
	// nothing is removed.
	Failed bool `avro:"failed"`
	// Items, on an end marker, is how many distinct external ids the task
	// uploaded (0: not told). Offers missing from the feed are removed
	// only when every one of them was loaded by the task.
	Items int64 `avro:"items"`
}

// IDClaim is a claim on offer ids (offers.ids): the permutation's secret
// (KEY), or the block of ids its offset names (BLOCK).
type IDClaim struct {
	Kind   string    `avro:"kind"`
	Secret []byte    `avro:"secret"`
	By     string    `avro:"by"`
	At     time.Time `avro:"at"`
}

// Kinds of IDClaim.
const (
	IDClaimKey   = "KEY"
	IDClaimBlock = "BLOCK"
)

// FeedEntry says which offer holds a seller's external id and the last
// task that touched it (feeds.index).
type FeedEntry struct {
	SellerID   string `avro:"seller_id"`
	ExternalID string `avro:"external_id"`
	OfferID    string `avro:"offer_id"`
	TaskID     int64  `avro:"task_id"`
}

// PhotoRequest asks the photo service to process one photo (photos.requests).
type PhotoRequest struct {
	OfferID   string `avro:"offer_id"`
	SourceURL string `avro:"source_url"`
	Version   int64  `avro:"version"`
}

// PhotoResult is the photo service's answer for one photo (photos.results).
type PhotoResult struct {
	OfferID   string `avro:"offer_id"`
	SourceURL string `avro:"source_url"`
	OK        bool   `avro:"ok"`
	URL       string `avro:"url"`
	Error     string `avro:"error"`
}

// ModerationOpinion sets or lifts a ban (moderation.opinions).
type ModerationOpinion struct {
	OfferID string   `avro:"offer_id"`
	Banned  bool     `avro:"banned"`
	Reasons []string `avro:"reasons"`
}

// Draft is an owner's draft: an offer before publication.
type Draft struct {
	ID        string    `avro:"id" json:"id"`
	Owner     string    `avro:"owner" json:"owner"`
	Category  string    `avro:"category" json:"category"`
	Offer     Offer     `avro:"offer" json:"offer"`
	UpdatedAt time.Time `avro:"updated_at" json:"updated_at"`
	Version   int64     `avro:"version" json:"version"`
}

// DraftRecord is the drafts group's value of an owner (drafts-table).
type DraftRecord struct {
	Draft Draft `avro:"draft"`
	// Published marks Draft as published: it is kept so that a repeated
	// PUBLISH is answered as the first, and the owner has no current draft.
	Published bool `avro:"published"`
	// Recent are the answers to the last commands that wrote the record.
	Recent []RecentResult `avro:"recent"`
}

// DraftKind is what a DraftCommand asks.
type DraftKind string

// Draft command kinds.
const (
	DraftCurrent DraftKind = "CURRENT"
	DraftSave    DraftKind = "SAVE"
	DraftDiscard DraftKind = "DISCARD"
	DraftHand    DraftKind = "HAND"
	// DraftPublish makes an offer of the draft ExpectedID and retires it,
	// in one write of the drafts table (the offer's CREATE is emitted with
	// it, and again on a repeat).
	DraftPublish DraftKind = "PUBLISH"
)

// DraftCommand is a draft operation (drafts.commands).
type DraftCommand struct {
	Kind       DraftKind `avro:"kind"`
	Anon       string    `avro:"anon"`
	User       string    `avro:"user"`
	Category   string    `avro:"category"`
	NewID      string    `avro:"new_id"`
	Draft      *Draft    `avro:"draft"`
	ExpectedID string    `avro:"expected_id"`
	// ReplyPartition and ReplyOffset are unused since the hand-over became
	// three commands from the API; they stay for the released schema.
	ReplyPartition int32 `avro:"reply_partition"`
	ReplyOffset    int64 `avro:"reply_offset"`
}

// DraftResult is the drafts group's answer (drafts.results).
type DraftResult struct {
	Owner           string  `avro:"owner"`
	SourcePartition int32   `avro:"source_partition"`
	SourceOffset    int64   `avro:"source_offset"`
	Outcome         Outcome `avro:"outcome"`
	Reason          string  `avro:"reason"`
	Draft           *Draft  `avro:"draft"`
}

// Codecs of the offer storage's schemas. Each is safe for concurrent use.
var (
	OfferRecords       = codecFor[OfferRecord](OfferRecordName)
	OfferCommands      = codecFor[OfferCommand](OfferCommandName)
	OfferEvents        = codecFor[OfferEvent](OfferEventName)
	OfferResults       = codecFor[OfferResult](OfferResultName)
	CabinetChanges     = codecFor[CabinetChange](CabinetChangeName)
	SellerCabinets     = codecFor[SellerCabinet](SellerCabinetName)
	PresetEntries      = codecFor[PresetEntry](PresetEntryName)
	FeedItems          = codecFor[FeedItem](FeedItemName)
	FeedEntries        = codecFor[FeedEntry](FeedEntryName)
	IDClaims           = codecFor[IDClaim](IDClaimName)
	PhotoRequests      = codecFor[PhotoRequest](PhotoRequestName)
	PhotoResults       = codecFor[PhotoResult](PhotoResultName)
	ModerationOpinions = codecFor[ModerationOpinion](ModerationOpinionName)
	DraftRecords       = codecFor[DraftRecord](DraftRecordName)
	DraftCommands      = codecFor[DraftCommand](DraftCommandName)
	DraftResults       = codecFor[DraftResult](DraftResultName)
	QueueItems         = codecFor[QueueItem](QueueItemName)
	StageTimers        = codecFor[StageTimer](StageTimerName)
	StageEffects       = codecFor[StageEffect](StageEffectName)
)

// QueueItem is an offer to process by a stage (scheduler.queue.<stage>).
type QueueItem struct {
	OfferID string `avro:"offer_id"`
	Stage   string `avro:"stage"`
	Version int64  `avro:"version"`
	// StateVersion is the stage state's version when the offer was queued.
	StateVersion int64     `avro:"state_version"`
	Low          bool      `avro:"low"`
	At           time.Time `avro:"at"`
}

// StageTimer is a stage's pending timer of an offer (scheduler.timers).
type StageTimer struct {
	OfferID string `avro:"offer_id"`
	Stage   string `avro:"stage"`
	DueAt   int64  `avro:"due_at"`
}

// StageEffect is a saved stage result, for side effects (scheduler.effects).
type StageEffect struct {
	Stage   string     `avro:"stage"`
	Offer   Offer      `avro:"offer"`
	Version int64      `avro:"version"`
	State   StageState `avro:"state"`
	Changed bool       `avro:"changed"`
	At      time.Time  `avro:"at"`
}

// FeedStatusName is the schema of a feed task's status.
const FeedStatusName = "offerlog.offers.FeedStatus"

// Feed task states.
const (
	FeedLoading = "LOADING"
	FeedDone    = "DONE"
	// FeedPartial is a finished task that removed nothing: an item was
	// refused, or not every item uploaded was seen loaded.
	FeedPartial = "PARTIAL"
	// FeedFailed is a task whose uploader said the upload failed.
	FeedFailed = "FAILED"
)

// FeedStatus is where a bulk upload task is, as the loader last wrote it on
// feeds.status (compacted, key seller/task). Its counts cover the task's
// feeds.ingest records up to Offset: the loader writes it before it commits
// them, and a record at or before Offset is not counted again.
type FeedStatus struct {
	SellerID  string    `avro:"seller_id" json:"seller_id"`
	TaskID    int64     `avro:"task_id" json:"task_id"`
	State     string    `avro:"state" json:"state"`
	Received  int64     `avro:"received" json:"received"`
	Applied   int64     `avro:"applied" json:"applied"`
	Skipped   int64     `avro:"skipped" json:"skipped"`
	Refused   int64     `avro:"refused" json:"refused"`
	Deleted   int64     `avro:"deleted" json:"deleted"`
	Uploaded  int64     `avro:"uploaded" json:"uploaded,omitempty"`
	Reason    string    `avro:"reason" json:"reason,omitempty"`
	Partition int32     `avro:"partition" json:"-"`
	Offset    int64     `avro:"offset" json:"-"`
	UpdatedAt time.Time `avro:"updated_at" json:"updated_at"`
}

// FeedStatuses is the codec of FeedStatus.
var FeedStatuses = codecFor[FeedStatus](FeedStatusName)
