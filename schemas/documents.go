package schemas

import "time"

// Action is what a document asks of the index.
type Action string

// Actions of RawDocument and SaasDocument.
const (
	ActionUpsert Action = "UPSERT"
	ActionDelete Action = "DELETE"
)

// FieldType is the type of a field declared in an epoch schema.
type FieldType string

// Field types an epoch may declare.
const (
	TypeString     FieldType = "string"
	TypeInt64      FieldType = "int64"
	TypeDouble     FieldType = "double"
	TypeBool       FieldType = "bool"
	TypeStringList FieldType = "string_list"
)

// FieldTypes lists every FieldType, in schema order.
var FieldTypes = []FieldType{TypeString, TypeInt64, TypeDouble, TypeBool, TypeStringList}

// Status is whether a registry record holds a live document or a tombstone.
type Status string

// Registry record statuses.
const (
	StatusLive      Status = "LIVE"
	StatusTombstone Status = "TOMBSTONE"
)

// Cause says what produced a registry record.
type Cause string

// Causes of a registry record.
const (
	CauseIngest Cause = "INGEST"
	CauseExpiry Cause = "EXPIRY"
)

// Decision is the registry's verdict on an ingested message.
type Decision string

// Decisions.
const (
	Accepted Decision = "ACCEPTED"
	Stale    Decision = "STALE"
	Invalid  Decision = "INVALID"
)

// Field is one indexed field; exactly one typed value is set.
type Field struct {
	Name       string   `avro:"name"`
	String     *string  `avro:"string"`
	Int64      *int64   `avro:"int64"`
	Double     *float64 `avro:"double"`
	Bool       *bool    `avro:"bool"`
	StringList []string `avro:"string_list"`
}

// Type returns the type of the value the field holds and whether exactly one
// value is set.
func (f Field) Type() (FieldType, bool) {
	var t FieldType
	n := 0
	if f.String != nil {
		t, n = TypeString, n+1
	}
	if f.Int64 != nil {
		t, n = TypeInt64, n+1
	}
	if f.Double != nil {
		t, n = TypeDouble, n+1
	}
	if f.Bool != nil {
		t, n = TypeBool, n+1
	}
	if f.StringList != nil {
		t, n = TypeStringList, n+1
	}
	return t, n == 1
}

// Value returns the field's value as a plain Go value (string, int64,
// float64, bool or []string), or nil if none is set.
func (f Field) Value() any {
	switch {
	case f.String != nil:
		return *f.String
	case f.Int64 != nil:
		return *f.Int64
	case f.Double != nil:
		return *f.Double
	case f.Bool != nil:
		return *f.Bool
	case f.StringList != nil:
		return f.StringList
	}
	return nil
}

// Embedding is one named embedding vector.
type Embedding struct {
	Name   string    `avro:"name"`
	Vector []float32 `avro:"vector"`
}

// RawDocument is a document sent for indexing (documents.ingest).
type RawDocument struct {
	PK         string      `avro:"pk"`
	Version    int64       `avro:"version"`
	Epoch      int64       `avro:"epoch"`
	Action     Action      `avro:"action"`
	Timestamp  time.Time   `avro:"timestamp"`
	TTLSeconds int64       `avro:"ttl_seconds"`
	Fields     []Field     `avro:"fields"`
	Embeddings []Embedding `avro:"embeddings"`
}

// FieldSpec declares one field of an epoch.
type FieldSpec struct {
	Name     string    `avro:"name" json:"name"`
	Type     FieldType `avro:"type" json:"type"`
	Required bool      `avro:"required" json:"required"`
	// Analyzer is how the searcher reads the words of a string or
	// string_list field (one of Analyzers); "" is the epoch's.
	Analyzer string `avro:"analyzer" json:"analyzer,omitempty"`
}

// The analyzers the searcher reads a string field's words with. Each
// folds case and diacritics (é is e, ё is е); english and russian also
// drop their language's stop words and stem (bicycles is bicycle,
// велосипеды is велосипед). Exact matches (filters, sort) read the value
// as it is, whatever the analyzer.
const (
	AnalyzerStandard = "standard"
	AnalyzerEnglish  = "english"
	AnalyzerRussian  = "russian"
)

// Analyzers lists the analyzers an epoch may name.
var Analyzers = []string{AnalyzerStandard, AnalyzerEnglish, AnalyzerRussian}

// EmbeddingSpec declares one embedding of an epoch.
type EmbeddingSpec struct {
	Name      string `avro:"name" json:"name"`
	Dimension int    `avro:"dimension" json:"dimension"`
}

// EpochSchema is the document schema of one client epoch (epochs).
type EpochSchema struct {
	Client       string          `avro:"client" json:"client"`
	Epoch        int64           `avro:"epoch" json:"epoch"`
	Fields       []FieldSpec     `avro:"fields" json:"fields"`
	Embeddings   []EmbeddingSpec `avro:"embeddings" json:"embeddings"`
	RegisteredAt time.Time       `avro:"registered_at" json:"registered_at"`
	// Analyzer is the analyzer of the string fields that name none (one
	// of Analyzers); "" is AnalyzerStandard.
	Analyzer string `avro:"analyzer" json:"analyzer,omitempty"`
}

// AnalyzerOf returns the analyzer the searcher reads f's words with: its
// own, else the epoch's, else AnalyzerStandard.
func (e *EpochSchema) AnalyzerOf(f FieldSpec) string {
	switch {
	case f.Analyzer != "":
		return f.Analyzer
	case e.Analyzer != "":
		return e.Analyzer
	}
	return AnalyzerStandard
}

// RegistryRecord is the registry's record of a document (registry-table,
// documents.changes).
type RegistryRecord struct {
	Client          string      `avro:"client"`
	PK              string      `avro:"pk"`
	Epoch           int64       `avro:"epoch"`
	Version         int64       `avro:"version"`
	Timestamp       time.Time   `avro:"timestamp"`
	Status          Status      `avro:"status"`
	Cause           Cause       `avro:"cause"`
	ExpiresAt       *time.Time  `avro:"expires_at"`
	TTLSeconds      int64       `avro:"ttl_seconds"`
	Fields          []Field     `avro:"fields"`
	Embeddings      []Embedding `avro:"embeddings"`
	SourcePartition int32       `avro:"source_partition"`
	SourceOffset    int64       `avro:"source_offset"`
	IngestedAt      time.Time   `avro:"ingested_at"`
	// RecentVerdicts are internal to the registry's table; changes carry
	// none.
	RecentVerdicts []RecentVerdict `avro:"recent_verdicts"`
}

// RecentVerdict is a verdict the registry gave on a message of a key.
type RecentVerdict struct {
	Partition int32    `avro:"partition"`
	Offset    int64    `avro:"offset"`
	Verdict   Decision `avro:"verdict"`
	Reason    string   `avro:"reason"`
}

// Verdict is the registry's decision on one ingested message
// (documents.results).
type Verdict struct {
	Client          string    `avro:"client"`
	PK              string    `avro:"pk"`
	Verdict         Decision  `avro:"verdict"`
	Reason          string    `avro:"reason"`
	SourcePartition int32     `avro:"source_partition"`
	SourceOffset    int64     `avro:"source_offset"`
	Epoch           int64     `avro:"epoch"`
	Version         int64     `avro:"version"`
	Timestamp       time.Time `avro:"timestamp"`
}

// ExpiryCheck asks the registry to expire a version if it is due
// (written to documents.ingest by the registry's sweep).
type ExpiryCheck struct {
	Epoch     int64     `avro:"epoch"`
	Version   int64     `avro:"version"`
	Timestamp time.Time `avro:"timestamp"`
	Status    Status    `avro:"status"`
}

// FailedConversion is a change waiting for the indexer to retry it
// (documents.failed).
type FailedConversion struct {
	Change   RegistryRecord `avro:"change"`
	Reason   string         `avro:"reason"`
	Attempts int32          `avro:"attempts"`
	FailedAt time.Time      `avro:"failed_at"`
}

// DeadLetter is a message that could not be decoded, kept as it was.
type DeadLetter struct {
	Topic     string    `avro:"topic"`
	Partition int32     `avro:"partition"`
	Offset    int64     `avro:"offset"`
	Key       []byte    `avro:"key"`
	Value     []byte    `avro:"value"`
	Reason    string    `avro:"reason"`
	Group     string    `avro:"group"`
	Timestamp time.Time `avro:"timestamp"`
	// ValueSize is the size of the original value; more than len(Value)
	// when the value was cut to the dead letter's bound.
	ValueSize int64 `avro:"value_size"`
	// ValueSHA256 is the SHA-256 of the whole original value.
	ValueSHA256 []byte `avro:"value_sha256"`
	// KeySize is the size of the original key; more than len(Key) when the
	// key was cut.
	KeySize int64 `avro:"key_size"`
	// Headers are the original record's headers (cut like the value).
	Headers []DeadLetterHeader `avro:"headers"`
	// NullValue says the original value was null (a tombstone), not empty.
	NullValue bool `avro:"null_value"`
}

// DeadLetterHeader is one header of a dead-lettered record.
type DeadLetterHeader struct {
	Key   string `avro:"key"`
	Value []byte `avro:"value"`
}

// Complete reports whether the dead letter holds the whole original key and
// value, so that it can be put back on its topic as it was.
func (d *DeadLetter) Complete() bool {
	return int64(len(d.Value)) >= d.ValueSize && int64(len(d.Key)) >= d.KeySize
}

// SaasDocument is one record of a client's search feed (saas.<client>).
type SaasDocument struct {
	PK         string      `avro:"pk"`
	Action     Action      `avro:"action"`
	Epoch      int64       `avro:"epoch"`
	Version    int64       `avro:"version"`
	Timestamp  time.Time   `avro:"timestamp"`
	ExpiresAt  *time.Time  `avro:"expires_at"`
	Fields     []Field     `avro:"fields"`
	Embeddings []Embedding `avro:"embeddings"`
}

// YtRecord is one record of a client's archive (yt.<client>).
type YtRecord struct {
	PK              string      `avro:"pk"`
	Action          Action      `avro:"action"`
	Epoch           int64       `avro:"epoch"`
	Version         int64       `avro:"version"`
	Timestamp       time.Time   `avro:"timestamp"`
	TTLSeconds      int64       `avro:"ttl_seconds"`
	Fields          []Field     `avro:"fields"`
	Embeddings      []Embedding `avro:"embeddings"`
	IngestedAt      time.Time   `avro:"ingested_at"`
	SourcePartition int32       `avro:"source_partition"`
	SourceOffset    int64       `avro:"source_offset"`
}

// Codecs of the current schemas. Each is safe for concurrent use.
var (
	RawDocuments      = codecFor[RawDocument](RawDocumentName)
	EpochSchemas      = codecFor[EpochSchema](EpochSchemaName)
	RegistryRecords   = codecFor[RegistryRecord](RegistryRecordName)
	Verdicts          = codecFor[Verdict](VerdictName)
	ExpiryChecks      = codecFor[ExpiryCheck](ExpiryCheckName)
	FailedConversions = codecFor[FailedConversion](FailedConversionName)
	DeadLetters       = codecFor[DeadLetter](DeadLetterName)
	SaasDocuments     = codecFor[SaasDocument](SaasDocumentName)
	YtRecords         = codecFor[YtRecord](YtRecordName)
)
