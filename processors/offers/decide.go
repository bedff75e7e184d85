package offers

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Presets of the seller cabinet, each computed from the offer itself.
const (
	PresetAll      = "all"      // every offer not deleted
	PresetActive   = "active"   // ACTIVE and not banned
	PresetInactive = "inactive" // INACTIVE and not banned
	PresetExpired  = "expired"  // EXPIRED and not banned
	PresetBanned   = "banned"   // banned by moderation, whatever its status
	PresetSold     = "sold"     // SOLD and not banned
)

// Presets lists every preset.
var Presets = []string{PresetAll, PresetActive, PresetInactive, PresetExpired, PresetBanned, PresetSold}

// PresetsOf returns the presets an offer belongs to, in Presets order.
func PresetsOf(o *schemas.Offer, banned bool) []string {
	if o.Status == schemas.OfferDeleted {
		return []string{}
	}
	out := []string{PresetAll}
	if banned {
		return append(out, PresetBanned)
	}
	switch o.Status {
	case schemas.OfferActive:
		out = append(out, PresetActive)
	case schemas.OfferInactive:
		out = append(out, PresetInactive)
	case schemas.OfferExpired:
		out = append(out, PresetExpired)
	case schemas.OfferSold:
		out = append(out, PresetSold)
	}
	return out
}

// Exposed reports whether r's offer is shown to buyers: ACTIVE and not
// banned. Its exposure time is what the expiry stage counts.
func Exposed(r *schemas.OfferRecord) bool {
	return r.Offer.Status == schemas.OfferActive && !r.Moderation.Banned
}

// SummaryOf returns what the cabinet counts of r.
func SummaryOf(r *schemas.OfferRecord) schemas.Summary {
	return schemas.Summary{Presets: PresetsOf(&r.Offer, r.Moderation.Banned), Sold: r.Billing.Sold, SoldPrice: r.Billing.SoldPrice}
}

// Input is one command of the aggregate's input, decoded. Photo and
// Opinion are set from a PHOTO or MODERATION command while it is decided.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
	At        time.Time // the message's timestamp
	Key       string    // the offer id

	Command *schemas.OfferCommand
	Photo   *schemas.PhotoResult
	Opinion *schemas.ModerationOpinion

	// ArchiveAfter is how long after an offer became terminal (Terminal)
	// it is archived; 0: never. The aggregate's configuration, the same for
	// every input, so that a replay decides as the first run did.
	ArchiveAfter time.Duration
	// Exclusive are the stages that never hold an offer together: the
	// aggregate's configuration, as ArchiveAfter is.
	Exclusive []string
}

// Decision is what the aggregate does with an input.
type Decision struct {
	Outcome schemas.Outcome
	Reason  string
	Field   string
	// Version is the offer's version after the input (0 if none).
	Version int64
	// Record, when not nil, is the next version to write; its Previous is
	// the cabinet summary of the version it replaces.
	Record *schemas.OfferRecord
	// Change names the change for offers.events.
	Change string
	// Photos are the photos to request.
	Photos []schemas.PhotoRequest
	// StateOnly marks a write of stage parts alone: the offer's version and
	// content are unchanged, and offers.events is not written.
	StateOnly bool
	// Queue, if set, is to be appended to its stage's queue; Timer to
	// scheduler.timers (DueAt 0: the timer is gone); Effect to
	// scheduler.effects.
	Queue *schemas.QueueItem
	// Forward, if set, is a command to append to offers.commands: the
	// CREATE of a published draft under the next id of its chain.
	Forward *schemas.OfferCommand
	Timer   *schemas.StageTimer
	Effect  *schemas.StageEffect
	// ArchiveTimer, if set, is the offer's archive timer to write to
	// scheduler.timers (DueAt 0: the timer is gone).
	ArchiveTimer *schemas.StageTimer
	// Archive, if set, is an archived record to write to offers.archive;
	// Remove, if set, an archived record that leaves the table (a
	// tombstone) and the feeds' indexes.
	Archive, Remove *schemas.OfferRecord
}

// Changes named on offers.events.
const (
	ChangeCreated    = "CREATED"
	ChangeUpdated    = "UPDATED"
	ChangeDeleted    = "DELETED"
	ChangeFeed       = "FEED"
	ChangePhotos     = "PHOTOS"
	ChangeModeration = "MODERATION"
)

// Decide returns what the aggregate does with in, given the offer's current
// record cur (nil when the id is free). It does not look at the clock: the
// time of a change is in.At.
func Decide(cur *schemas.OfferRecord, in Input) Decision {
	if in.Command == nil {
		return Decision{Outcome: schemas.OutcomeInvalid, Reason: "empty input"}
	}
	d := command(cur, in)
	if d.Record == nil && cur != nil && d.Forward == nil && d.Remove == nil && d.Outcome != schemas.OutcomeInvalid {
		// An answer that writes nothing (CONFLICT, IGNORED, ...) is
		// remembered in the record all the same: after a crash the table
		// can be ahead of the input's last commit, and the command, seen
		// again against a later record, could get another answer than the
		// first time, and the table another value than the log implies.
		next := clone(cur)
		Remember(next, in.Partition, in.Offset, d)
		d.Record, d.StateOnly = next, true
	}
	return d
}

func refuse(outcome schemas.Outcome, cur *schemas.OfferRecord, field, format string, args ...any) Decision {
	d := Decision{Outcome: outcome, Field: field, Reason: fmt.Sprintf(format, args...)}
	if cur != nil {
		d.Version = cur.Version
	}
	return d
}

// live reports whether cur is an offer its seller may change: not
// deleted, and not archived (an archived offer is read-only).
func live(cur *schemas.OfferRecord) bool {
	return cur != nil && cur.Offer.Status != schemas.OfferDeleted && !cur.Archived
}

func command(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	if c.OfferID != in.Key {
		return refuse(schemas.OutcomeInvalid, cur, "offer_id", "%q is not the message key %q", c.OfferID, in.Key)
	}
	if !ValidID(c.OfferID) {
		return refuse(schemas.OutcomeInvalid, cur, "offer_id", "%q is not an offer id", c.OfferID)
	}
	switch c.Kind {
	case schemas.CommandCreate:
		return create(cur, in)
	case schemas.CommandUpdate, schemas.CommandFeedUpsert:
		return update(cur, in)
	case schemas.CommandDelete, schemas.CommandFeedDelete:
		return remove(cur, in)
	case schemas.CommandPhoto:
		if c.Photo == nil || c.Photo.OfferID != c.OfferID {
			return refuse(schemas.OutcomeInvalid, cur, "photo", "missing, or for another offer")
		}
		in.Photo = c.Photo
		return photo(cur, in)
	case schemas.CommandEnqueue, schemas.CommandResult, schemas.CommandSetTimer, schemas.CommandStateCAS:
		if c.Stage == ArchiveStage && c.Kind == schemas.CommandEnqueue {
			return archive(cur, in)
		}
		return stageCommand(cur, in)
	case schemas.CommandArchive:
		return archived(cur, in)
	case schemas.CommandArmArchive:
		return arm(cur, in)
	case schemas.CommandModeration:
		if c.Opinion == nil || c.Opinion.OfferID != c.OfferID {
			return refuse(schemas.OutcomeInvalid, cur, "opinion", "missing, or for another offer")
		}
		in.Opinion = c.Opinion
		return opinion(cur, in)
	}
	return refuse(schemas.OutcomeInvalid, cur, "kind", "unknown command %q", c.Kind)
}

// origin names what a CREATE comes from.
func origin(c *schemas.OfferCommand) string {
	if c.DraftID != "" {
		return "draft"
	}
	return "feed item"
}

// createDiff returns the fields in which a CREATE of the same origin as
// offer cur differs from it: none for a retry. A feed item of a later task
// than the one that last loaded the offer differs in its task: the loader
// sends it again as a FEED_UPSERT. Photos are compared by their sources
// (their processing changes the rest); the status is the offer's life, not
// its content.
func createDiff(cur *schemas.OfferRecord, c *schemas.OfferCommand) []string {
	var diff []string
	if c.ExternalID != "" && c.TaskID > cur.FeedTask {
		diff = append(diff, "task_id")
	}
	if c.Offer == nil {
		return diff
	}
	a, b := &cur.Offer, c.Offer
	sources := func(ps []schemas.Photo) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.SourceURL
		}
		return out
	}
	for _, f := range []struct {
		name string
		diff bool
	}{
		{"category", a.Category != b.Category}, {"title", a.Title != b.Title}, {"description", a.Description != b.Description},
		{"price", (a.Price == nil) != (b.Price == nil) || (a.Price != nil && b.Price != nil && *a.Price != *b.Price)},
		{"currency", a.Currency != b.Currency}, {"attributes", !slices.Equal(a.Attributes, b.Attributes)},
		{"photos", !slices.Equal(sources(a.Photos), sources(b.Photos))},
	} {
		if f.diff {
			diff = append(diff, f.name)
		}
	}
	return diff
}

// sameOrigin reports whether a CREATE for a held id is a retry of the
// create that made it (same draft, or same feed item), not a collision.
func sameOrigin(cur *schemas.OfferRecord, c *schemas.OfferCommand) bool {
	if c.DraftID != "" {
		return cur.DraftOwner == c.DraftOwner && cur.DraftID == c.DraftID
	}
	return c.ExternalID != "" && cur.Offer.SellerID == c.SellerID && cur.Offer.ExternalID == c.ExternalID
}

func create(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	if cur != nil {
		if !sameOrigin(cur, c) {
			d := refuse(schemas.OutcomeCollision, nil, "offer_id", "id %s is taken", c.OfferID)
			if c.DraftID != "" && c.Hop+1 < MaxHops {
				// A publish moves along its draft's chain of ids.
				next := *c
				next.OfferID, next.Hop = NextID(c.DraftOwner, c.DraftID, c.OfferID), c.Hop+1
				d.Forward = &next
				d.Reason += "; the draft's publish moves to " + next.OfferID
			}
			return d
		}
		if diff := createDiff(cur, c); len(diff) > 0 {
			return refuse(schemas.OutcomeConflict, cur, "offer", "offer %s was created from the same %s with other %s",
				c.OfferID, origin(c), strings.Join(diff, ", "))
		}
		return Decision{Outcome: schemas.OutcomeOK, Reason: "already created", Version: cur.Version}
	}
	if c.Offer == nil {
		return refuse(schemas.OutcomeInvalid, nil, "offer", "missing")
	}
	o := *c.Offer
	o.ID, o.SellerID, o.ExternalID = c.OfferID, c.SellerID, c.ExternalID
	if e := Validate(&o); e != nil {
		return refuse(schemas.OutcomeInvalid, nil, e.Field, "%s", e.Reason)
	}
	if o.Status == "" {
		o.Status = schemas.OfferActive
	}
	o.CreatedAt, o.UpdatedAt = in.At, in.At
	o.Photos = mergePhotos(nil, o.Photos)
	next := &schemas.OfferRecord{
		Offer:      o,
		Moderation: schemas.Moderation{Reasons: []string{}},
		Billing:    schemas.Billing{Tariff: "free"},
		Stages:     []schemas.StageState{},
		DraftOwner: c.DraftOwner, DraftID: c.DraftID, FeedTask: c.TaskID,
		Previous: schemas.Summary{Presets: []string{}},
	}
	sell(next)
	return written(next, nil, in, ChangeCreated)
}

func update(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	feed := c.Kind == schemas.CommandFeedUpsert
	switch {
	case !live(cur):
		return refuse(schemas.OutcomeNotFound, cur, "offer_id", "no offer %s", c.OfferID)
	case cur.Offer.SellerID != c.SellerID:
		return refuse(schemas.OutcomeNotFound, nil, "offer_id", "no offer %s", c.OfferID) // as a free id: ids cannot be probed
	case feed && cur.FeedTask > c.TaskID:
		return refuse(schemas.OutcomeIgnored, cur, "task_id", "offer was last loaded by task %d, after %d", cur.FeedTask, c.TaskID)
	case !feed && c.ExpectedVersion >= 0 && c.ExpectedVersion != cur.Version:
		return refuse(schemas.OutcomeConflict, cur, "expected_version", "offer is at version %d, not %d", cur.Version, c.ExpectedVersion)
	case c.Offer == nil:
		return refuse(schemas.OutcomeInvalid, cur, "offer", "missing")
	}
	o := *c.Offer
	o.ID, o.SellerID, o.ExternalID = cur.Offer.ID, cur.Offer.SellerID, cur.Offer.ExternalID
	if e := Validate(&o); e != nil {
		return refuse(schemas.OutcomeInvalid, cur, e.Field, "%s", e.Reason)
	}
	switch {
	case feed && (cur.Offer.Status == schemas.OfferSold || cur.Offer.Status == schemas.OfferExpired):
		// A feed does not bring a sold offer back, nor an expired one:
		// its exposure is spent (docs/RULES.md).
		o.Status = cur.Offer.Status
	case feed:
		o.Status = schemas.OfferActive
	case o.Status == "":
		o.Status = cur.Offer.Status
	}
	o.CreatedAt, o.UpdatedAt = cur.Offer.CreatedAt, in.At
	o.Photos = mergePhotos(cur.Offer.Photos, o.Photos)
	next := clone(cur)
	next.Offer = o
	if feed {
		next.FeedTask = c.TaskID
	}
	sell(next)
	change := ChangeUpdated
	if feed {
		change = ChangeFeed
	}
	return written(next, cur, in, change)
}

func remove(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	feed := c.Kind == schemas.CommandFeedDelete
	switch {
	case !live(cur) && feed:
		return refuse(schemas.OutcomeIgnored, cur, "offer_id", "no offer %s", c.OfferID)
	case !live(cur):
		return refuse(schemas.OutcomeNotFound, cur, "offer_id", "no offer %s", c.OfferID)
	case cur.Offer.SellerID != c.SellerID:
		return refuse(schemas.OutcomeNotFound, nil, "offer_id", "no offer %s", c.OfferID) // as a free id: ids cannot be probed
	case feed && cur.FeedTask >= c.TaskID:
		return refuse(schemas.OutcomeIgnored, cur, "task_id", "offer was loaded by task %d, not before %d", cur.FeedTask, c.TaskID)
	case !feed && c.ExpectedVersion >= 0 && c.ExpectedVersion != cur.Version:
		return refuse(schemas.OutcomeConflict, cur, "expected_version", "offer is at version %d, not %d", cur.Version, c.ExpectedVersion)
	}
	next := clone(cur)
	next.Offer.Status = schemas.OfferDeleted
	next.Offer.UpdatedAt = in.At
	return written(next, cur, in, ChangeDeleted)
}

func photo(cur *schemas.OfferRecord, in Input) Decision {
	p := in.Photo
	if !live(cur) {
		return refuse(schemas.OutcomeIgnored, cur, "offer_id", "no offer %s", p.OfferID)
	}
	i := slices.IndexFunc(cur.Offer.Photos, func(ph schemas.Photo) bool { return ph.SourceURL == p.SourceURL })
	if i < 0 {
		return refuse(schemas.OutcomeIgnored, cur, "source_url", "offer has no photo %s", p.SourceURL)
	}
	ph := schemas.Photo{SourceURL: p.SourceURL, Status: schemas.PhotoFailed, Error: p.Error}
	if p.OK {
		ph = schemas.Photo{SourceURL: p.SourceURL, Status: schemas.PhotoReady, URL: p.URL}
	}
	if cur.Offer.Photos[i] == ph {
		return refuse(schemas.OutcomeIgnored, cur, "", "photo already so")
	}
	next := clone(cur)
	next.Offer.Photos[i] = ph
	next.Offer.UpdatedAt = in.At
	return written(next, cur, in, ChangePhotos)
}

func opinion(cur *schemas.OfferRecord, in Input) Decision {
	op := in.Opinion
	if cur == nil || cur.Archived {
		return refuse(schemas.OutcomeIgnored, nil, "offer_id", "no offer %s", op.OfferID)
	}
	reasons := op.Reasons
	if !op.Banned || reasons == nil {
		reasons = []string{}
	}
	if cur.Moderation.Banned == op.Banned && slices.Equal(cur.Moderation.Reasons, reasons) {
		return refuse(schemas.OutcomeIgnored, cur, "", "opinion changes nothing")
	}
	next := clone(cur)
	next.Moderation = schemas.Moderation{Banned: op.Banned, Reasons: reasons, UpdatedAt: in.At}
	return written(next, cur, in, ChangeModeration)
}

// sell records a first sale in the billing part: Sold and MoneyEarned count
// every offer once, at its price when it was first sold.
func sell(next *schemas.OfferRecord) {
	if next.Offer.Status != schemas.OfferSold || next.Billing.Sold {
		return
	}
	next.Billing.Sold = true
	if next.Offer.Price != nil {
		next.Billing.SoldPrice = *next.Offer.Price
	}
}

// mergePhotos returns the photos of an update: a photo already known keeps
// its processing, a new one is PENDING.
func mergePhotos(old, photos []schemas.Photo) []schemas.Photo {
	out := make([]schemas.Photo, 0, len(photos))
	for _, p := range photos {
		i := slices.IndexFunc(old, func(o schemas.Photo) bool { return o.SourceURL == p.SourceURL })
		if i >= 0 {
			out = append(out, old[i])
			continue
		}
		out = append(out, schemas.Photo{SourceURL: p.SourceURL, Status: schemas.PhotoPending})
	}
	return out
}

func written(next, cur *schemas.OfferRecord, in Input, change string) Decision {
	next.ByStage, next.StageDepth = "", 0
	if in.Command != nil && in.Command.Kind == schemas.CommandResult {
		change = "STAGE " + in.Command.Stage
		next.ByStage = in.Command.Stage
		if cur != nil {
			next.StageDepth = cur.StageDepth + 1
		}
	}
	next.Version++
	next.Previous = schemas.Summary{Presets: []string{}}
	var before *schemas.Offer
	if cur != nil {
		next.Previous = cur.Summary
		before = &cur.Offer
	}
	next.Offer.Expose(before, Exposed(next), in.At.UnixMilli())
	next.Summary = SummaryOf(next)
	noteFieldVersions(next, cur)
	next.SourceTopic, next.SourcePartition, next.SourceOffset = in.Topic, in.Partition, in.Offset
	d := Decision{Outcome: schemas.OutcomeOK, Version: next.Version, Record: next, Change: change}
	armArchive(next, in, &d)
	for _, p := range next.Offer.Photos {
		if p.Status == schemas.PhotoPending && (cur == nil || !slices.ContainsFunc(cur.Offer.Photos,
			func(o schemas.Photo) bool { return o.SourceURL == p.SourceURL })) {
			d.Photos = append(d.Photos, schemas.PhotoRequest{OfferID: next.Offer.ID, SourceURL: p.SourceURL, Version: next.Version})
		}
	}
	Remember(next, in.Partition, in.Offset, d)
	return d
}

func clone(r *schemas.OfferRecord) *schemas.OfferRecord {
	c := *r
	c.Offer.Photos = slices.Clone(r.Offer.Photos)
	c.Offer.Attributes = slices.Clone(r.Offer.Attributes)
	c.Moderation.Reasons = slices.Clone(r.Moderation.Reasons)
	c.Stages = slices.Clone(r.Stages)
	c.Recent = slices.Clone(r.Recent)
	c.FieldVersions = slices.Clone(r.FieldVersions)
	return &c
}

// Remember notes d as the result of the command at (partition, offset) in r.
func Remember(r *schemas.OfferRecord, partition int32, offset int64, d Decision) {
	r.Recent = table.Remember(schemas.RecentResult{Topic: topics.OffersCommands, Partition: partition, Offset: offset,
		Outcome: string(d.Outcome), Reason: d.Reason, Field: d.Field, Version: d.Version})
}

// Recall returns the result r remembers for the command at (partition,
// offset), if it was decided before.
func Recall(r *schemas.OfferRecord, partition int32, offset int64) (schemas.RecentResult, bool) {
	if r == nil {
		return schemas.RecentResult{}, false
	}
	return table.Recall(r.Recent, partition, offset)
}

// CabinetSpread is how many keys a seller's cabinet is spread over (the
// seed's seq_no, "для уменьшения нагрузки на конкретные строки"): an
// offer's changes go to one of them, by its id, so a seller with a million
// offers is not one hot key of the cabinet; readers sum them.
const CabinetSpread = 10

// CabinetKey is the key on cabinet.changes (and cabinet-table) of the
// changes of offerID of seller: seller/n, n < CabinetSpread.
func CabinetKey(seller, offerID string) string {
	h := fnv.New32a()
	h.Write([]byte(offerID))
	return seller + "/" + strconv.Itoa(int(h.Sum32()%CabinetSpread))
}

// CabinetSeller returns the seller of a key of cabinet-table: seller/n, or
// seller alone for a cabinet written before it was spread.
func CabinetSeller(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// PresetKey is the key of an offer's membership of a preset on
// cabinet.presets: seller/preset/rank/offer id, where rank orders newest
// first within a preset (created later, smaller rank).
func PresetKey(seller, preset string, created time.Time, offerID string) string {
	return seller + "/" + preset + "/" + Rank(created) + "/" + offerID
}

// FarRank is the time, in Unix milliseconds, ranks count down from (year
// 2286).
const FarRank = 9_999_999_999_999

// Rank is the zero-padded distance of created from the far future, in
// milliseconds: keys sort by it newest first.
func Rank(created time.Time) string {
	r := FarRank - created.UnixMilli()
	if r < 0 {
		r = 0
	}
	s := strconv.FormatInt(r, 10)
	for len(s) < 13 {
		s = "0" + s
	}
	return s
}

// PresetPrefix is the prefix of the keys of a seller's preset.
func PresetPrefix(seller, preset string) string { return seller + "/" + preset + "/" }

// FeedKey is the key of a seller's external id on feeds.index.
func FeedKey(seller, externalID string) string { return seller + "/" + externalID }

// FeedTaskKey is the key of a seller's external id on feeds.tasks, under
// the task that last loaded it: keys sort by task within a seller.
func FeedTaskKey(seller string, task int64, externalID string) string {
	return FeedTaskPrefix(seller, task) + externalID
}

// FeedTaskPrefix is the prefix of the keys of task's entries on
// feeds.tasks; the keys of every task before it sort before it.
func FeedTaskPrefix(seller string, task int64) string {
	return fmt.Sprintf("%s/%020d/", seller, max(task, 0))
}
