package topics

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

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
	// Epochs holds the epoch schemas, compacted, keyed "client/epoch".
	Epochs = "epochs"
	// RegistryTable is the changelog of the registry group's table.
	RegistryTable = "registry-table"
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
	NumeratorTable = "numerator-table"
)

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
	// Retention is retention.ms; 0 leaves the broker default, Forever keeps
	// everything.
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
	case t.Retention == Forever:
		c["retention.ms"] = "-1"
	case t.Retention > 0:
		c["retention.ms"] = strconv.FormatInt(t.Retention.Milliseconds(), 10)
	}
	return c
}

const day = 24 * time.Hour

// Catalogue returns the fixed topics, each partitioned topic with the given
// number of partitions. Every partitioned topic of the document pipeline must
// have the same count: the registry's inputs and table are co-partitioned.
func Catalogue(partitions int32) []Topic {
	return []Topic{
		{Name: DocumentsIngest, Partitions: partitions, Retention: 7 * day, Schema: schemas.RawDocumentName,
			Doc: "documents sent for indexing, key client/pk (and the registry's expiry checks)"},
		{Name: DocumentsResults, Partitions: partitions, Retention: 7 * day, Schema: schemas.VerdictName,
			Doc: "one verdict per ingested message: accepted, stale or invalid with a reason"},
		{Name: DocumentsDead, Partitions: partitions, Retention: 30 * day, Schema: schemas.DeadLetterName,
			Doc: "undecodable messages, raw bytes kept, with the reason"},
		{Name: DocumentsChanges, Partitions: partitions, Retention: 7 * day, Schema: schemas.RegistryRecordName,
			Doc: "every change of the registry: accepted documents, tombstones, expiries"},
		{Name: DocumentsFailed, Partitions: partitions, Retention: 30 * day, Schema: schemas.FailedConversionName,
			Doc: "changes the indexer failed to convert or deliver, retried from here"},
		{Name: Epochs, Partitions: 1, Compacted: true, Schema: schemas.EpochSchemaName,
			Doc: "epoch schemas, key client/epoch"},
		{Name: RegistryTable, Partitions: partitions, Compacted: true, Schema: schemas.RegistryRecordName,
			Doc: "the registry's table: the current record of every document"},
		{Name: NumeratorOffers, Partitions: partitions, Retention: 7 * day, Schema: schemas.OfferSeenName,
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
		{Name: NumeratorTable, Partitions: partitions, Compacted: true, Schema: schemas.NumeratorEntryName,
			Doc: "the numerator's table: every key's entry"},
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
	if client, ok := strings.CutPrefix(topic, SaasPrefix); ok && ValidateClient(client) == nil {
		return schemas.SaasDocumentName, true
	}
	if client, ok := strings.CutPrefix(topic, YtPrefix); ok && ValidateClient(client) == nil {
		return schemas.YtRecordName, true
	}
	return "", false
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
