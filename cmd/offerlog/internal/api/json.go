package api

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

// DocumentJSON is a RawDocument as clients post it.
type DocumentJSON struct {
	PK         string                     `json:"pk"`
	Version    *int64                     `json:"version"`
	Epoch      *int64                     `json:"epoch"`
	Action     string                     `json:"action"`
	Timestamp  string                     `json:"timestamp"`
	TTLSeconds int64                      `json:"ttl_seconds"`
	Fields     map[string]json.RawMessage `json:"fields"`
	Embeddings map[string][]float64       `json:"embeddings"`
}

// FieldError is a problem with one part of a request.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// toRawDocument checks the shape of a posted document and converts its
// fields with the types its epoch declares. Fields and embeddings are sorted
// by name so equal documents encode to equal bytes.
func toRawDocument(d *DocumentJSON, schema *schemas.EpochSchema) (*schemas.RawDocument, *FieldError) {
	if d.PK == "" {
		return nil, fieldErr("pk", "required")
	}
	if d.Version == nil {
		return nil, fieldErr("version", "required")
	}
	if d.Epoch == nil {
		return nil, fieldErr("epoch", "required")
	}
	action := schemas.Action(d.Action)
	if action != schemas.ActionUpsert && action != schemas.ActionDelete {
		return nil, fieldErr("action", "want UPSERT or DELETE, got %q", d.Action)
	}
	if d.Timestamp == "" {
		return nil, fieldErr("timestamp", "required")
	}
	ts, err := time.Parse(time.RFC3339Nano, d.Timestamp)
	if err != nil {
		return nil, fieldErr("timestamp", "want an RFC 3339 time such as 2026-11-01T10:00:00Z, got %q", truncate(d.Timestamp, 40))
	}
	doc := &schemas.RawDocument{PK: d.PK, Version: *d.Version, Epoch: *d.Epoch, Action: action,
		Timestamp: ts.UTC().Truncate(time.Millisecond), TTLSeconds: d.TTLSeconds,
		Fields: []schemas.Field{}, Embeddings: []schemas.Embedding{}}
	types := map[string]schemas.FieldType{}
	for _, f := range schema.Fields {
		types[f.Name] = f.Type
	}
	names := make([]string, 0, len(d.Fields))
	for name := range d.Fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t, ok := types[name]
		if !ok {
			return nil, fieldErr("fields."+name, "not in the schema of epoch %d", schema.Epoch)
		}
		f, err := fieldOf(name, t, d.Fields[name])
		if err != nil {
			return nil, fieldErr("fields."+name, "%v", err)
		}
		doc.Fields = append(doc.Fields, f)
	}
	names = names[:0]
	for name := range d.Embeddings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vec := d.Embeddings[name]
		e := schemas.Embedding{Name: name, Vector: make([]float32, len(vec))}
		for i, x := range vec {
			if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
				return nil, fieldErr(fmt.Sprintf("embeddings.%s[%d]", name, i), "not a finite 32-bit float")
			}
			e.Vector[i] = float32(x)
		}
		doc.Embeddings = append(doc.Embeddings, e)
	}
	return doc, nil
}

func fieldOf(name string, t schemas.FieldType, raw json.RawMessage) (schemas.Field, error) {
	f := schemas.Field{Name: name}
	var err error
	switch t {
	case schemas.TypeString:
		var v string
		if err = json.Unmarshal(raw, &v); err == nil {
			f.String = &v
		}
	case schemas.TypeInt64:
		var v int64
		if err = json.Unmarshal(raw, &v); err == nil {
			f.Int64 = &v
		}
	case schemas.TypeDouble:
		var v float64
		if err = json.Unmarshal(raw, &v); err == nil {
			f.Double = &v
		}
	case schemas.TypeBool:
		var v bool
		if err = json.Unmarshal(raw, &v); err == nil {
			f.Bool = &v
		}
	case schemas.TypeStringList:
		var v []string
		if err = json.Unmarshal(raw, &v); err == nil {
			if v == nil {
				v = []string{}
			}
			f.StringList = v
		}
	default:
		return f, fmt.Errorf("unknown type %s", t)
	}
	if err != nil || string(raw) == "null" {
		return f, fmt.Errorf("want a %s value, got %s", t, truncate(string(raw), 40))
	}
	return f, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// RecordJSON is a registry record as the API shows it.
type RecordJSON struct {
	Client     string               `json:"client"`
	PK         string               `json:"pk"`
	Epoch      int64                `json:"epoch"`
	Version    int64                `json:"version"`
	Timestamp  time.Time            `json:"timestamp"`
	Status     schemas.Status       `json:"status"`
	Cause      schemas.Cause        `json:"cause"`
	ExpiresAt  *time.Time           `json:"expires_at,omitempty"`
	TTLSeconds int64                `json:"ttl_seconds,omitempty"`
	Fields     map[string]any       `json:"fields"`
	Embeddings map[string][]float32 `json:"embeddings"`
	Partition  int32                `json:"source_partition"`
	Offset     int64                `json:"source_offset"`
	IngestedAt time.Time            `json:"ingested_at"`
}

func recordJSON(r *schemas.RegistryRecord) RecordJSON {
	out := RecordJSON{Client: r.Client, PK: r.PK, Epoch: r.Epoch, Version: r.Version, Timestamp: r.Timestamp,
		Status: r.Status, Cause: r.Cause, ExpiresAt: r.ExpiresAt, TTLSeconds: r.TTLSeconds,
		Fields: map[string]any{}, Embeddings: map[string][]float32{},
		Partition: r.SourcePartition, Offset: r.SourceOffset, IngestedAt: r.IngestedAt}
	for _, f := range r.Fields {
		out.Fields[f.Name] = f.Value()
	}
	for _, e := range r.Embeddings {
		out.Embeddings[e.Name] = e.Vector
	}
	return out
}

// EpochJSON is an epoch schema as clients register it.
type EpochJSON struct {
	Fields     []schemas.FieldSpec     `json:"fields"`
	Embeddings []schemas.EmbeddingSpec `json:"embeddings"`
	// Analyzer is the analyzer of the string fields that name none.
	Analyzer string `json:"analyzer,omitempty"`
}

// validateEpoch checks the fields and embeddings of a schema: non-empty
// unique names, known types, positive dimensions, known analyzers, named
// on words only.
func validateEpoch(e *EpochJSON) *FieldError {
	if len(e.Fields) == 0 {
		return fieldErr("fields", "an epoch declares at least one field")
	}
	if e.Analyzer != "" && !slices.Contains(schemas.Analyzers, e.Analyzer) {
		return fieldErr("analyzer", "want one of %s; got %q", strings.Join(schemas.Analyzers, ", "), e.Analyzer)
	}
	seen := map[string]bool{}
	for i, f := range e.Fields {
		at := fmt.Sprintf("fields[%d]", i)
		if f.Name == "" {
			return fieldErr(at+".name", "required")
		}
		if seen[f.Name] {
			return fieldErr(at+".name", "%q is declared twice", f.Name)
		}
		seen[f.Name] = true
		known := false
		for _, t := range schemas.FieldTypes {
			known = known || t == f.Type
		}
		if !known {
			return fieldErr(at+".type", "want one of string, int64, double, bool, string_list; got %q", f.Type)
		}
		switch {
		case f.Analyzer == "":
		case !slices.Contains(schemas.Analyzers, f.Analyzer):
			return fieldErr(at+".analyzer", "want one of %s; got %q", strings.Join(schemas.Analyzers, ", "), f.Analyzer)
		case f.Type != schemas.TypeString && f.Type != schemas.TypeStringList:
			return fieldErr(at+".analyzer", "%q is %s: an analyzer reads the words of string and string_list fields", f.Name, f.Type)
		}
	}
	for i, em := range e.Embeddings {
		at := fmt.Sprintf("embeddings[%d]", i)
		if em.Name == "" {
			return fieldErr(at+".name", "required")
		}
		if seen[em.Name] {
			return fieldErr(at+".name", "%q is declared twice among fields and embeddings", em.Name)
		}
		seen[em.Name] = true
		if em.Dimension < 1 || em.Dimension > 65536 {
			return fieldErr(at+".dimension", "want 1 to 65536, got %d", em.Dimension)
		}
	}
	return nil
}
