package topics

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

// Table is the name of a table topic: every record its key's latest value
// (a tombstone its deletion), so that a copy of the topic read to its end
// is the table. A group table's changelog (table.Group.Table) and the
// topic a view copies (table.NewView) are Tables; a stream (a topic of
// events, each record one) is a plain string, and cannot be given where a
// Table is wanted: a stream as a changelog, or a view of one, would
// compact away every event but a key's last.
type Table string

// Writer returns the transactional id under which partition p of the
// table is written (streams/table): one id a partition, so that the
// member given the partition fences every earlier holder of it.
func (t Table) Writer(p int32) string { return t.Writers() + strconv.Itoa(int(p)) }

// Writers returns the prefix of the table's partitions' transactional ids
// (Writer), which a component that owns the table is granted.
func (t Table) Writers() string { return "offerlog-" + string(t) + "-" }

// Names of the fixed topics of the document-indexing pipeline.
const (
	// DocumentsIngest takes RawDocuments keyed "client/pk". The registry
	// also writes its ExpiryChecks here, so that expiry takes its place in
	// each partition's one order of events.
	DocumentsIngest = "documents.ingest"
	// DocumentsResults holds one Verdict per ingested message.
	DocumentsResults = "documents.results"
	// DocumentsDead holds messages that could not be decoded, raw bytes kept.
	DocumentsDead = "documents.dead"
	// DocumentsChanges holds every change of the registry (accepted documents,
	// tombstones, expiries), the indexer's input.
	DocumentsChanges = "documents.changes"
	// DocumentsFailed holds changes the indexer failed to convert or deliver,
	// retried from there.
	DocumentsFailed = "documents.failed"
	// DocumentsUrgent is the emergency queue: the changes of documents
	// posted with priority urgent (header PriorityHeader), copied from
	// documents.changes, which the indexer delivers to the search feed
	// on a lane of its own, never behind the main queue's backlog.
	DocumentsUrgent = "documents.urgent"
	// Epochs holds the epoch schemas, compacted, keyed "client/epoch".
	Epochs = "epochs"
	// RegistryTable is the changelog of the registry group's table.
	RegistryTable Table = "registry-table"
)

// PriorityHeader is the header of a documents.ingest record that asks for
// the emergency queue: value PriorityUrgent.
const (
	PriorityHeader = "offerlog-priority"
	PriorityUrgent = "urgent"
)

// Names of the numerator's topics.
const (
	// NumeratorOffers takes OfferSeen events keyed by offer key.
	NumeratorOffers = "numerator.offers"
	// NumeratorGenerations takes the sealer's commands: seal, rebuild, reshard.
	NumeratorGenerations = "numerator.generations"
	// NumeratorResults carries the sealer's decisions to the numerator group.
	NumeratorResults = "numerator.results"
	// NumeratorAssignments is the export of every key's (shard, doc_id).
	NumeratorAssignments = "numerator.assignments"
	// NumeratorStates holds one record per sealed generation, rebuild or reshard.
	NumeratorStates = "numerator.states"
	// NumeratorDead holds the numerator's undecodable and invalid input.
	NumeratorDead = "numerator.dead"
	// NumeratorTable is the changelog of the numerator group's table.
	NumeratorTable Table = "numerator-table"
)

// Names of the offer storage's topics (GOST).
const (
	// OffersCommands takes OfferCommands keyed by offer id: every write to
	// an offer, from the API and from feeds.
	OffersCommands = "offers.commands"
	// OffersEvents is the export of every offer change: the full offer with
	// its version, in order per offer, keyed by offer id.
	OffersEvents = "offers.events"
	// OffersResults holds the aggregate's answer to each command.
	OffersResults = "offers.results"
	// OffersDead holds the aggregate's undecodable and invalid input.
	OffersDead = "offers.dead"
	// OffersTable is the changelog of the offer aggregate's table.
	OffersTable Table = "offers-table"
	// OffersArchive holds every archived offer's last record (the offers
	// deleted, sold or expired longer than the aggregate's archive_after),
	// key offer id: they left offers-table (a tombstone), and reads by id
	// find them here. Time-retained: a year of archive.
	OffersArchive Table = "offers.archive"
	// OffersIDs holds the claims on offer ids (IDClaims, compacted, every
	// key distinct): the ids' permutation key and blocks of ids, each named
	// by its partition and offset. Its partition count is part of the id
	// format: OffersIDsPartitions, whatever the cluster's default.
	OffersIDs = "offers.ids"
	// PhotosRequests asks the photo service to process photos, key offer id.
	PhotosRequests = "photos.requests"
	// PhotosResults holds the photo service's answers, key offer id.
	PhotosResults = "photos.results"
	// ModerationOpinions holds moderation's bans and lifts, key offer id.
	ModerationOpinions = "moderation.opinions"
	// CabinetChanges carries each offer's moves to its seller's cabinet,
	// key seller/n (offers.CabinetKey).
	CabinetChanges = "cabinet.changes"
	// CabinetPresets holds each offer's preset memberships, compacted, key
	// seller/preset/rank/offer id so that a seller's preset reads in order.
	CabinetPresets Table = "cabinet.presets"
	// CabinetTable is the changelog of the cabinet group's table.
	CabinetTable Table = "cabinet-table"
	// FeedsIngest takes bulk upload items and end markers, key seller id.
	FeedsIngest = "feeds.ingest"
	// FeedsIndex says which offer holds a seller's external id, compacted,
	// key seller/external_id.
	FeedsIndex Table = "feeds.index"
	// FeedsTasks is feeds.index by task: which offer each task loaded,
	// compacted, keyed seller/task (20 digits)/external_id, so that the
	// offers an older task loaded are a range of keys (the seed's
	// "WHERE seller_id = ? AND task_id < ? LIMIT 1000").
	FeedsTasks Table = "feeds.tasks"
	// FeedsStatus holds each feed task's status, compacted, keyed
	// seller/task: written by the loader, read by the API.
	FeedsStatus Table = "feeds.status"
	// DraftsCommands takes draft operations keyed by owner (anon:ID, user:ID).
	DraftsCommands = "drafts.commands"
	// DraftsResults holds the drafts group's answers.
	DraftsResults = "drafts.results"
	// DraftsTable is the changelog of the drafts group's table.
	DraftsTable Table = "drafts-table"
)

// OffersIDsPartitions is the partition count of offers.ids: the id space
// is split between its partitions, so it never changes.
const OffersIDsPartitions = 8

// Names of the stage scheduler's topics.
const (
	// SchedulerTimers holds every pending stage timer, compacted, key
	// offer_id/stage; the aggregate writes and removes them.
	SchedulerTimers = "scheduler.timers"
	// SchedulerEffects holds every saved stage result, for side effects.
	SchedulerEffects = "scheduler.effects"
	// SchedulerDead holds queue items a stage failed on too many times.
	SchedulerDead = "scheduler.dead"
	// QueuePrefix starts the name of every stage queue.
	QueuePrefix = "scheduler.queue."
	// PushPrefix starts the name of every stage's push topic.
	PushPrefix = "scheduler.push."
)

// DeadLetterTopics are the topics the consumers send what they cannot
// process to (the console lists and re-drives them).
func DeadLetterTopics() []string {
	return []string{DocumentsDead, NumeratorDead, OffersDead, SchedulerDead}
}

// PushTopic returns the push topic of stage: its saved results, with its
// private state, for the stage's owner alone.
func PushTopic(stage string) string { return PushPrefix + stage }

// QueueTopic returns the queue of stage, or its low-priority queue (for
// re-crawls).
func QueueTopic(stage string, low bool) string {
	if low {
		return QueuePrefix + stage + ".low"
	}
	return QueuePrefix + stage
}

// ForStages returns the queues of the stages, and the push topics of
// those of them in pushing.
func ForStages(stages, pushing []string, partitions int32) []Topic {
	var out []Topic
	for _, s := range pushing {
		out = append(out, Topic{Name: PushTopic(s), Partitions: partitions, Retention: 7 * day, Schema: schemas.StageEffectName,
			Doc: "saved results of stage " + s + " with its state, for the stage's push hook"})
	}
	for _, s := range stages {
		for _, low := range []bool{false, true} {
			out = append(out, Topic{Name: QueueTopic(s, low), Partitions: partitions, Retention: 7 * day, Schema: schemas.QueueItemName,
				Doc: "offers to process by stage " + s})
		}
	}
	return out
}

// AuthTokens holds the API tokens, compacted, keyed by token id.
const AuthTokens = "auth.tokens"

// SchemasRegistered holds the schemas registered through the schema
// registry API, compacted, keyed by registry id. Every process follows
// it.
const SchemasRegistered = "schemas.registered"

// Prefixes of the per-client export topics.
const (
	SaasPrefix = "saas."
	YtPrefix   = "yt."
)

// Forever is the Retention of a topic that keeps its records forever.
const Forever time.Duration = -1

// Topic describes one topic of the catalogue.
type Topic struct {
	Name       string
	Partitions int32
	// Compacted selects cleanup.policy=compact instead of delete.
	Compacted bool
	// Retention is retention.ms; 0 leaves the broker default (for a
	// compacted topic: keeps every key for ever), Forever keeps everything.
	Retention time.Duration
	// Schema is the full name of the Avro schema of the values.
	Schema string
	// Doc says what the topic holds.
	Doc string
}

// Configs returns the topic configs Ensure sets and checks.
func (t Topic) Configs() map[string]string {
	c := map[string]string{"cleanup.policy": "delete"}
	if t.Compacted {
		c["cleanup.policy"] = "compact"
	}
	switch {
	case t.Retention == Forever, t.Compacted && t.Retention == 0:
		// A compacted topic keeps every key's last record for ever: with
		// the broker's default retention (7 days) keys would vanish.
		c["retention.ms"] = "-1"
	case t.Retention > 0:
		c["retention.ms"] = strconv.FormatInt(t.Retention.Milliseconds(), 10)
	}
	return c
}

const day = 24 * time.Hour

// ReplayInputs are the topics replays rebuild tables from that are not
// compacted: the catalogue keeps them for ever, since a replay refuses to
// rebuild from a part of the history. WithInputRetention sets another
// retention, for a cluster that cannot keep them (at GOST's size the
// offers' commands alone grow by terabytes a year: docs/ARCHITECTURE.md,
// "Sizing"); its tables are then restored from their changelogs, and
// replayed only with --allow-gaps.
var ReplayInputs = []string{DocumentsIngest, DocumentsChanges, NumeratorOffers,
	OffersCommands, PhotosResults, ModerationOpinions, DraftsCommands, CabinetChanges}

// WithInputRetention returns ts with the retention of the ReplayInputs
// among them set to d (0 or Forever: for ever).
func WithInputRetention(ts []Topic, d time.Duration) []Topic {
	if d <= 0 {
		d = Forever
	}
	out := slices.Clone(ts)
	for i := range out {
		if slices.Contains(ReplayInputs, out[i].Name) {
			out[i].Retention = d
		}
	}
	return out
}

// Catalogue returns the fixed topics, each partitioned topic with the given
// number of partitions. Every partitioned topic of the document pipeline must
// have the same count: the registry's inputs and table are co-partitioned.
func Catalogue(partitions int32) []Topic {
	return []Topic{
		{Name: DocumentsIngest, Partitions: partitions, Retention: Forever, Schema: schemas.RawDocumentName,
			Doc: "documents sent for indexing, key client/pk (and the registry's expiry checks)"},
		{Name: DocumentsResults, Partitions: partitions, Retention: 7 * day, Schema: schemas.VerdictName,
			Doc: "one verdict per ingested message: accepted, stale or invalid with a reason"},
		{Name: DocumentsDead, Partitions: partitions, Retention: 30 * day, Schema: schemas.DeadLetterName,
			Doc: "undecodable messages, raw bytes kept, with the reason"},
		{Name: DocumentsChanges, Partitions: partitions, Retention: Forever, Schema: schemas.RegistryRecordName,
			Doc: "every change of the registry: accepted documents, tombstones, expiries"},
		{Name: DocumentsUrgent, Partitions: partitions, Retention: 7 * day, Schema: schemas.RegistryRecordName,
			Doc: "the emergency queue: changes of documents posted with priority urgent (also on documents.changes)"},
		{Name: DocumentsFailed, Partitions: partitions, Retention: 30 * day, Schema: schemas.FailedConversionName,
			Doc: "changes the indexer failed to convert or deliver, retried from here"},
		{Name: Epochs, Partitions: 1, Compacted: true, Schema: schemas.EpochSchemaName,
			Doc: "epoch schemas, key client/epoch"},
		{Name: string(RegistryTable), Partitions: partitions, Compacted: true, Schema: schemas.RegistryRecordName,
			Doc: "the registry's table: the current record of every document"},
		{Name: NumeratorOffers, Partitions: partitions, Retention: Forever, Schema: schemas.OfferSeenName,
			Doc: "offer keys seen in a generation, key business_id/offer_id/shop_id/warehouse_id"},
		{Name: NumeratorGenerations, Partitions: 1, Retention: Forever, Schema: schemas.GenerationMarkerName,
			Doc: "the sealer's commands: seal a generation, rebuild, reshard"},
		{Name: NumeratorResults, Partitions: partitions, Retention: 7 * day, Schema: schemas.AssignmentName,
			Doc: "the sealer's decisions, applied by the numerator group"},
		{Name: NumeratorAssignments, Partitions: partitions, Compacted: true, Schema: schemas.AssignmentName,
			Doc: "every key's (shard, doc_id, version), key as numerator.offers"},
		{Name: NumeratorStates, Partitions: 1, Retention: Forever, Schema: schemas.NumeratorStateName,
			Doc: "the numerator's state after each seal, rebuild or reshard"},
		{Name: NumeratorDead, Partitions: partitions, Retention: 30 * day, Schema: schemas.DeadLetterName,
			Doc: "the numerator's undecodable or invalid input, with the reason"},
		{Name: string(NumeratorTable), Partitions: partitions, Compacted: true, Schema: schemas.NumeratorEntryName,
			Doc: "the numerator's table: every key's entry"},
		{Name: OffersCommands, Partitions: partitions, Retention: Forever, Schema: schemas.OfferCommandName,
			Doc: "every write to an offer (API and feeds), key offer id"},
		{Name: OffersEvents, Partitions: partitions, Retention: 30 * day, Schema: schemas.OfferEventName,
			Doc: "the full offer after every change, in order per offer, key offer id"},
		{Name: OffersResults, Partitions: partitions, Retention: 7 * day, Schema: schemas.OfferResultName,
			Doc: "the offer aggregate's answer to each command"},
		{Name: OffersDead, Partitions: partitions, Retention: 30 * day, Schema: schemas.DeadLetterName,
			Doc: "the offer aggregate's undecodable or invalid input, with the reason"},
		{Name: string(OffersTable), Partitions: partitions, Compacted: true, Schema: schemas.OfferRecordName,
			Doc: "the offer aggregate's table: every offer with its moderation, billing and stage parts"},
		{Name: string(OffersArchive), Partitions: partitions, Retention: 365 * day, Schema: schemas.OfferRecordName,
			Doc: "archived offers (deleted, sold or expired longer than archive_after): the last record, key offer id"},
		{Name: OffersIDs, Partitions: OffersIDsPartitions, Compacted: true, Schema: schemas.IDClaimName,
			Doc: "claims on offer ids: the permutation's key and blocks of ids (partition count fixed: part of the id format)"},
		{Name: PhotosRequests, Partitions: partitions, Retention: 7 * day, Schema: schemas.PhotoRequestName,
			Doc: "photos to process, key offer id"},
		{Name: PhotosResults, Partitions: partitions, Retention: Forever, Schema: schemas.PhotoResultName,
			Doc: "processed photos, key offer id"},
		{Name: ModerationOpinions, Partitions: partitions, Retention: Forever, Schema: schemas.ModerationOpinionName,
			Doc: "moderation's opinions (ban or lift), key offer id"},
		{Name: CabinetChanges, Partitions: partitions, Retention: Forever, Schema: schemas.CabinetChangeName,
			Doc: "each offer's move in its seller's cabinet, key seller/n (n 0-9 by offer id: a seller is spread over 10 keys)"},
		{Name: string(CabinetPresets), Partitions: partitions, Compacted: true, Schema: schemas.PresetEntryName,
			Doc: "preset memberships, key seller/preset/rank/offer id"},
		{Name: string(CabinetTable), Partitions: partitions, Compacted: true, Schema: schemas.SellerCabinetName,
			Doc: "the cabinet's table: every seller's preset counts and counters, in 10 parts (key seller/n) that reads sum"},
		{Name: FeedsIngest, Partitions: partitions, Retention: 7 * day, Schema: schemas.FeedItemName,
			Doc: "bulk upload items and end markers, key seller id"},
		{Name: string(FeedsIndex), Partitions: partitions, Compacted: true, Schema: schemas.FeedEntryName,
			Doc: "which offer holds a seller's external id, key seller/external_id"},
		{Name: string(FeedsTasks), Partitions: partitions, Compacted: true, Schema: schemas.FeedEntryName,
			Doc: "feeds.index by task: key seller/task/external_id, so a task's leftovers are a range"},
		{Name: string(FeedsStatus), Partitions: partitions, Compacted: true, Schema: schemas.FeedStatusName,
			Doc: "each feed task's status: state and counts, key seller/task"},
		{Name: DraftsCommands, Partitions: partitions, Retention: Forever, Schema: schemas.DraftCommandName,
			Doc: "draft operations, key owner (anon:ID or user:ID)"},
		{Name: DraftsResults, Partitions: partitions, Retention: 7 * day, Schema: schemas.DraftResultName,
			Doc: "the drafts group's answers"},
		{Name: string(DraftsTable), Partitions: partitions, Compacted: true, Schema: schemas.DraftRecordName,
			Doc: "the drafts group's table: every owner's draft"},
		{Name: SchedulerTimers, Partitions: partitions, Compacted: true, Schema: schemas.StageTimerName,
			Doc: "pending stage timers, key offer_id/stage"},
		{Name: SchedulerEffects, Partitions: partitions, Retention: 7 * day, Schema: schemas.StageEffectName,
			Doc: "saved stage results (offer and state), for side effects, key offer id"},
		{Name: AuthTokens, Partitions: 1, Compacted: true, Schema: schemas.TokenName,
			Doc: "API tokens, key token id: scope and hash, never the token itself"},
		{Name: SchemasRegistered, Partitions: 1, Compacted: true, Schema: schemas.RegisteredSchemaName,
			Doc: "schemas registered through the registry API, key registry id"},
		{Name: SchedulerDead, Partitions: partitions, Retention: 30 * day, Schema: schemas.DeadLetterName,
			Doc: "queue items a stage failed on too many times, with the reason"},
	}
}

// ForClient returns the export topics of a client.
func ForClient(client string, partitions int32) []Topic {
	return []Topic{
		{Name: SaasTopic(client), Partitions: partitions, Compacted: true, Schema: schemas.SaasDocumentName,
			Doc: "search feed of " + client + ": the current document or its deletion, key client/pk"},
		{Name: YtTopic(client), Partitions: partitions, Retention: Forever, Schema: schemas.YtRecordName,
			Doc: "archive of " + client + ": every accepted version with its body, key client/pk"},
	}
}

// SaasTopic returns the name of a client's search feed.
func SaasTopic(client string) string { return SaasPrefix + client }

// YtTopic returns the name of a client's archive feed.
func YtTopic(client string) string { return YtPrefix + client }

var clientName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidateClient reports whether client is usable as a client name, and so
// inside topic names: 1 to 63 of a-z, 0-9, '_' and '-', starting with a
// letter or digit.
func ValidateClient(client string) error {
	if !clientName.MatchString(client) {
		return fmt.Errorf("client %q: want 1-63 characters of a-z, 0-9, '_' or '-', starting with a letter or digit", client)
	}
	return nil
}

// SchemaFor returns the schema name of the values of topic, for the fixed
// topics and the per-client ones.
func SchemaFor(topic string) (string, bool) {
	for _, t := range Catalogue(1) {
		if t.Name == topic {
			return t.Schema, true
		}
	}
	if strings.HasPrefix(topic, QueuePrefix) {
		return schemas.QueueItemName, true
	}
	if strings.HasPrefix(topic, PushPrefix) {
		return schemas.StageEffectName, true
	}
	if client, ok := strings.CutPrefix(topic, SaasPrefix); ok && ValidateClient(client) == nil {
		return schemas.SaasDocumentName, true
	}
	if client, ok := strings.CutPrefix(topic, YtPrefix); ok && ValidateClient(client) == nil {
		return schemas.YtRecordName, true
	}
	return "", false
}

// Find returns the catalogue's topic named name with the given number of
// partitions, or a zero Topic named name (configs of a plain topic).
func Find(name string, partitions int32) Topic {
	for _, t := range Catalogue(partitions) {
		if t.Name == name {
			return t
		}
	}
	return Topic{Name: name, Partitions: partitions}
}

// Names returns the sorted names of ts.
func Names(ts []Topic) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	sort.Strings(out)
	return out
}
