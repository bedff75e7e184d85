package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// samples returns one value of every current schema, used to write the
// JSON samples of a release (OFFERLOG_WRITE_SAMPLES=<release>).
func samples() map[string]any {
	doc := sampleDocument()
	ts := time.UnixMilli(1_700_000_000_000).UTC()
	exp := ts.Add(time.Hour)
	rec := RegistryRecord{Client: "shop", PK: doc.PK, Epoch: 1, Version: 3, Timestamp: ts, Status: StatusLive,
		Cause: CauseIngest, ExpiresAt: &exp, TTLSeconds: 3600, Fields: doc.Fields, Embeddings: doc.Embeddings,
		SourcePartition: 2, SourceOffset: 77, IngestedAt: ts,
		RecentVerdicts: []RecentVerdict{{Partition: 2, Offset: 77, Verdict: Accepted}}}
	return map[string]any{
		RawDocumentName: &doc,
		EpochSchemaName: &EpochSchema{Client: "shop", Epoch: 1, RegisteredAt: ts,
			Fields:     []FieldSpec{{Name: "title", Type: TypeString, Required: true}, {Name: "tags", Type: TypeStringList}},
			Embeddings: []EmbeddingSpec{{Name: "e", Dimension: 2}}},
		RegistryRecordName: &rec,
		VerdictName: &Verdict{Client: "shop", PK: "42", Verdict: Stale, Reason: "older version",
			SourcePartition: 1, SourceOffset: 9, Epoch: 1, Version: 2, Timestamp: ts},
		ExpiryCheckName:      &ExpiryCheck{Epoch: 1, Version: 3, Timestamp: ts, Status: StatusTombstone},
		FailedConversionName: &FailedConversion{Change: rec, Reason: "topic missing", Attempts: 2, FailedAt: ts},
		DeadLetterName: &DeadLetter{Topic: "documents.ingest", Partition: 1, Offset: 5, Key: []byte("shop/1"),
			Value: []byte{0xff, 0}, Reason: "not framed", Group: "registry", Timestamp: ts},
		SaasDocumentName: &SaasDocument{PK: "42", Action: ActionUpsert, Epoch: 1, Version: 3, Timestamp: ts,
			ExpiresAt: &exp, Fields: doc.Fields, Embeddings: doc.Embeddings},
		YtRecordName: &YtRecord{PK: "42", Action: ActionDelete, Epoch: 1, Version: 4, Timestamp: ts, IngestedAt: ts,
			SourcePartition: 1, SourceOffset: 10},
		OfferSeenName:        &OfferSeen{BusinessID: 1, OfferID: "sku", ShopID: 2, WarehouseID: 3, Generation: 7},
		GenerationMarkerName: &GenerationMarker{Action: MarkerSeal, Generation: 7, Scheme: -1},
		NumeratorEntryName:   &NumeratorEntry{BusinessID: 1, OfferID: "sku", ShopID: 2, WarehouseID: 3, Shard: 4, DocID: 10, LastSeen: 7, Version: "0.0.0.7"},
		AssignmentName:       &Assignment{BusinessID: 1, OfferID: "sku", ShopID: 2, WarehouseID: 3, Shard: 4, DocID: 10, Version: "0.0.0.7", Generation: 7},
		NumeratorStateName: &NumeratorState{Version: "0.0.0.7", Generation: 7, Scheme: 0, Shards: []ShardSummary{{Shard: 4, Live: 1, MaxDocID: 10, Free: 9}},
			Holder: "dc-a", Ticket: 3, SealedAt: ts},
	}
}

func encodeAny(t *testing.T, name string, v any) []byte {
	t.Helper()
	s, err := Current(name)
	if err != nil {
		t.Fatal(err)
	}
	body, err := avro.Marshal(s.Avro, v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return Frame(s, body)
}

func TestWriteReleaseSamples(t *testing.T) {
	release := os.Getenv("OFFERLOG_WRITE_SAMPLES")
	if release == "" {
		t.Skip("set OFFERLOG_WRITE_SAMPLES=<release> to freeze the current schemas' samples")
	}
	dir := filepath.Join("testdata", release)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range samples() {
		_, js, err := DecodeJSON(encodeAny(t, name, v))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.MarshalIndent(js, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name+".json"), append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleasedSchemasStayCompatible fails when a current schema can no
// longer read data of a released one (backward) or a released reader can no
// longer read current data (forward).
func TestReleasedSchemasStayCompatible(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	compat := avro.NewSchemaCompatibility()
	for _, cur := range all {
		rel, err := Released(cur.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(rel) == 0 {
			t.Errorf("%s has no released version: freeze it under schemas/released/", cur.Name)
		}
		for _, old := range rel {
			if err := compat.Compatible(cur.Avro, old.Avro); err != nil {
				t.Errorf("%s: current cannot read data of %s: %v", cur.Name, old.Release, err)
			}
			if err := compat.Compatible(old.Avro, cur.Avro); err != nil {
				t.Errorf("%s: readers of %s cannot read current data: %v", cur.Name, old.Release, err)
			}
		}
	}
}

// TestReleasedDataDecodes writes each release's samples with that release's
// schema, reads them with the current one, and reads current data with the
// released schema.
func TestReleasedDataDecodes(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	compat := avro.NewSchemaCompatibility()
	checked := 0
	for _, e := range entries {
		release := e.Name()
		for name := range samples() {
			raw, err := os.ReadFile(filepath.Join("testdata", release, name+".json"))
			if err != nil {
				t.Errorf("%s: no sample for %s: %v", release, name, err)
				continue
			}
			js, err := ParseJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := Released(name)
			var old *Schema
			for _, r := range rel {
				if r.Release == release {
					old = r
				}
			}
			if old == nil {
				t.Errorf("%s: sample for %s without its released schema", release, name)
				continue
			}
			data, err := EncodeJSON(old, js)
			if err != nil {
				t.Fatalf("%s %s: %v", release, name, err)
			}
			// Old data, current reader.
			_, back, err := decodeCurrent(name, data)
			if err != nil {
				t.Errorf("%s %s: current schema cannot read released data: %v", release, name, err)
				continue
			}
			// Current data, old reader.
			cur, _ := Current(name)
			text, _ := json.Marshal(back)
			backJSON, err := ParseJSON(text)
			if err != nil {
				t.Fatal(err)
			}
			curData, err := EncodeJSON(cur, backJSON)
			if err != nil {
				t.Fatalf("%s: re-encode with current schema: %v", name, err)
			}
			resolved, err := compat.Resolve(old.Avro, cur.Avro)
			if err != nil {
				t.Errorf("%s %s: resolve: %v", release, name, err)
				continue
			}
			var v any
			if err := avro.Unmarshal(resolved, curData[10:], &v); err != nil {
				t.Errorf("%s %s: released reader cannot read current data: %v", release, name, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no released sample was checked")
	}
}

// decodeCurrent decodes data with the current schema of name via the typed
// codecs, the path every processor takes.
func decodeCurrent(name string, data []byte) (*Schema, any, error) {
	var target any
	var err error
	switch name {
	case RawDocumentName:
		var v RawDocument
		err, target = RawDocuments.Decode(data, &v), &v
	case EpochSchemaName:
		var v EpochSchema
		err, target = EpochSchemas.Decode(data, &v), &v
	case RegistryRecordName:
		var v RegistryRecord
		err, target = RegistryRecords.Decode(data, &v), &v
	case VerdictName:
		var v Verdict
		err, target = Verdicts.Decode(data, &v), &v
	case ExpiryCheckName:
		var v ExpiryCheck
		err, target = ExpiryChecks.Decode(data, &v), &v
	case FailedConversionName:
		var v FailedConversion
		err, target = FailedConversions.Decode(data, &v), &v
	case DeadLetterName:
		var v DeadLetter
		err, target = DeadLetters.Decode(data, &v), &v
	case SaasDocumentName:
		var v SaasDocument
		err, target = SaasDocuments.Decode(data, &v), &v
	case YtRecordName:
		var v YtRecord
		err, target = YtRecords.Decode(data, &v), &v
	case OfferSeenName:
		var v OfferSeen
		err, target = OffersSeen.Decode(data, &v), &v
	case GenerationMarkerName:
		var v GenerationMarker
		err, target = GenerationMarkers.Decode(data, &v), &v
	case NumeratorEntryName:
		var v NumeratorEntry
		err, target = NumeratorEntries.Decode(data, &v), &v
	case AssignmentName:
		var v Assignment
		err, target = Assignments.Decode(data, &v), &v
	case NumeratorStateName:
		var v NumeratorState
		err, target = NumeratorStates.Decode(data, &v), &v
	}
	if err != nil {
		return nil, nil, err
	}
	cur, _ := Current(name)
	body, err := avro.Marshal(cur.Avro, target)
	if err != nil {
		return nil, nil, err
	}
	return DecodeJSON(Frame(cur, body))
}

func TestJSONRoundTrip(t *testing.T) {
	for name, v := range samples() {
		data := encodeAny(t, name, v)
		_, js, err := DecodeJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text, _ := json.Marshal(js)
		parsed, err := ParseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := Current(name)
		again, err := EncodeJSON(s, parsed)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		if !bytes.Equal(data, again) {
			t.Errorf("%s: JSON round trip changed the bytes\n%s", name, text)
		}
	}
}

func TestEncodeJSONRejects(t *testing.T) {
	s, _ := Current(RawDocumentName)
	tests := []struct {
		name, json, want string
	}{
		{"missing field", `{"pk":"1","version":1,"action":"UPSERT","timestamp":"2026-01-01T00:00:00Z"}`, "epoch: missing required field"},
		{"unknown field", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":0,"colour":"red"}`, "unknown field(s) colour"},
		{"wrong type", `{"pk":1,"version":1,"epoch":1,"action":"UPSERT","timestamp":0}`, "pk: want a string"},
		{"bad enum", `{"pk":"1","version":1,"epoch":1,"action":"MERGE","timestamp":0}`, `action: "MERGE" is not one of UPSERT|DELETE`},
		{"bad time", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"yesterday"}`, "timestamp: want an RFC 3339 time"},
		{"fraction", `{"pk":"1","version":1.5,"epoch":1,"action":"UPSERT","timestamp":0}`, "version: want an integer"},
		{"nested", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":0,"fields":[{"name":"a","int64":"x"}]}`, "fields[0].int64: value fits no branch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseJSON([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			_, err = EncodeJSON(s, v)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
