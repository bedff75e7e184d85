package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/offerlog/offerlog/third_party/forked/avro"
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
	offer := sampleOffer(ts)
	draft := Draft{ID: offer.ID, Owner: "user:u", Category: offer.Category, Offer: offer, UpdatedAt: ts, Version: 2}
	rec2 := OfferRecord{Offer: offer, Version: 3, Moderation: Moderation{Banned: true, Reasons: []string{"spam"}, UpdatedAt: ts},
		Billing: Billing{Tariff: "free", Sold: true, SoldPrice: 900}, Stages: []StageState{{Stage: "expiry", TypeURL: "t", Value: []byte{1}, Version: 2, Queued: true, TimerAt: 1_800_000_000_000}},
		DraftOwner: "user:u", DraftID: offer.ID, FeedTask: 4,
		Summary: Summary{Presets: []string{"all", "banned"}, Sold: true, SoldPrice: 900}, Previous: Summary{Presets: []string{"all", "active"}},
		SourceTopic: "offers.commands", SourcePartition: 1, SourceOffset: 9,
		Recent: []RecentResult{{Topic: "offers.commands", Partition: 1, Offset: 9, Outcome: "OK", Version: 3}}}
	return map[string]any{
		RawDocumentName: &doc,
		EpochSchemaName: &EpochSchema{Client: "shop", Epoch: 1, RegisteredAt: ts, Analyzer: AnalyzerEnglish,
			Fields:     []FieldSpec{{Name: "title", Type: TypeString, Required: true, Analyzer: AnalyzerRussian}, {Name: "tags", Type: TypeStringList}},
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
		OfferRecordName:      &rec2,
		OfferCommandName: &OfferCommand{Kind: CommandUpdate, OfferID: offer.ID, SellerID: "s1", ExpectedVersion: 2, Offer: &offer,
			Photo: &PhotoResult{OfferID: offer.ID, SourceURL: "https://img/1"}, Opinion: &ModerationOpinion{OfferID: offer.ID, Reasons: []string{}},
			Stage: "expiry", State: &rec2.Stages[0], TimerAt: 5, ReadVersion: 2, Low: true, FiredAt: 4, Hop: 1},
		OfferEventName: &OfferEvent{Offer: offer, Version: 3, Change: "UPDATED", Banned: true, BanReasons: []string{"spam"}, At: ts,
			Stages: rec2.Stages, Changed: []string{"title"}},
		OfferResultName:       &OfferResult{OfferID: offer.ID, SourcePartition: 1, SourceOffset: 9, Outcome: OutcomeConflict, Reason: "at 3", Field: "expected_version", Version: 3},
		CabinetChangeName:     &CabinetChange{SellerID: "s1", OfferID: offer.ID, SourceTopic: "offers.commands", SourcePartition: 1, SourceOffset: 9, Before: rec2.Previous, After: rec2.Summary},
		SellerCabinetName:     &SellerCabinet{SellerID: "s1", Presets: Counts{{Name: "all", Count: 2}, {Name: "active", Count: 1}}, Active: 1, Sold: 1, MoneyEarned: 900, Applied: Counts{{Name: "offers.commands/1", Count: 9}}},
		PresetEntryName:       &PresetEntry{SellerID: "s1", Preset: "active", OfferID: offer.ID, CreatedAt: ts},
		FeedItemName:          &FeedItem{SellerID: "s1", TaskID: 4, ExternalID: "vin-1", Offer: &offer, Failed: true, Items: 3},
		FeedEntryName:         &FeedEntry{SellerID: "s1", ExternalID: "vin-1", OfferID: offer.ID, TaskID: 4},
		IDClaimName:           &IDClaim{Kind: IDClaimKey, Secret: []byte{1, 2, 3}, By: "api-0", At: ts},
		PhotoRequestName:      &PhotoRequest{OfferID: offer.ID, SourceURL: "https://img/1", Version: 3},
		PhotoResultName:       &PhotoResult{OfferID: offer.ID, SourceURL: "https://img/1", OK: true, URL: "https://avatars/1"},
		ModerationOpinionName: &ModerationOpinion{OfferID: offer.ID, Banned: true, Reasons: []string{"spam"}},
		DraftCommandName:      &DraftCommand{Kind: DraftHand, Anon: "a", User: "u", Category: "cars", NewID: offer.ID, Draft: &draft, ReplyPartition: 2, ReplyOffset: 5},
		DraftResultName:       &DraftResult{Owner: "user:u", SourcePartition: 2, SourceOffset: 5, Outcome: OutcomeOK, Draft: &draft},
		DraftRecordName:       &DraftRecord{Draft: draft, Published: true, Recent: rec2.Recent},
		QueueItemName:         &QueueItem{OfferID: offer.ID, Stage: "expiry", Version: 3, StateVersion: 2, Low: true, At: ts},
		StageTimerName:        &StageTimer{OfferID: offer.ID, Stage: "expiry", DueAt: 1_800_000_000_000},
		StageEffectName:       &StageEffect{Stage: "expiry", Offer: offer, Version: 3, State: rec2.Stages[0], Changed: true, At: ts},
		FeedStatusName: &FeedStatus{SellerID: "s1", TaskID: 4, State: FeedPartial, Received: 10, Applied: 8, Skipped: 1, Refused: 1,
			Uploaded: 10, Reason: "an item of the task was refused", Partition: 3, Offset: 77, UpdatedAt: ts},
		RegisteredSchemaName: &RegisteredSchema{Subject: "documents.ingest-value", Schema: `{"type":"record","name":"X","fields":[]}`},
		TokenName:            &Token{ID: "0123456789abcdef", Hash: []byte{1, 2}, Kind: "seller", Subject: "s1", CreatedAt: ts, ExpiresAt: 1_800_000_000_000},
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
			if !releasedIn(name, release) {
				continue // the schema came after this release
			}
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
	default:
		target, err = decodeOffers(name, data)
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

func releasedIn(name, release string) bool {
	rel, _ := Released(name)
	for _, r := range rel {
		if r.Release == release {
			return true
		}
	}
	return false
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

func sampleOffer(ts time.Time) Offer {
	p := int64(900)
	return Offer{ID: "12345678903", SellerID: "s1", Category: "cars", Title: "Lada", Description: "runs", Price: &p, Currency: "RUB",
		Attributes: Attributes{{Name: "color", Value: "red"}}, Photos: []Photo{{SourceURL: "https://img/1", Status: PhotoPending}},
		Status: OfferSold, ExternalID: "vin-1", CreatedAt: ts, UpdatedAt: ts}
}

// decodeOffers decodes data with the codec of an offer storage schema.
func decodeOffers(name string, data []byte) (any, error) {
	switch name {
	case OfferRecordName:
		return decodeWith(OfferRecords, data)
	case OfferCommandName:
		return decodeWith(OfferCommands, data)
	case OfferEventName:
		return decodeWith(OfferEvents, data)
	case OfferResultName:
		return decodeWith(OfferResults, data)
	case CabinetChangeName:
		return decodeWith(CabinetChanges, data)
	case SellerCabinetName:
		return decodeWith(SellerCabinets, data)
	case PresetEntryName:
		return decodeWith(PresetEntries, data)
	case FeedItemName:
		return decodeWith(FeedItems, data)
	case FeedEntryName:
		return decodeWith(FeedEntries, data)
	case IDClaimName:
		return decodeWith(IDClaims, data)
	case PhotoRequestName:
		return decodeWith(PhotoRequests, data)
	case PhotoResultName:
		return decodeWith(PhotoResults, data)
	case ModerationOpinionName:
		return decodeWith(ModerationOpinions, data)
	case DraftCommandName:
		return decodeWith(DraftCommands, data)
	case DraftResultName:
		return decodeWith(DraftResults, data)
	case DraftRecordName:
		return decodeWith(DraftRecords, data)
	case QueueItemName:
		return decodeWith(QueueItems, data)
	case StageTimerName:
		return decodeWith(StageTimers, data)
	case StageEffectName:
		return decodeWith(StageEffects, data)
	}
	return nil, fmt.Errorf("no codec for %s", name)
}

func decodeWith[T any](c *Codec[T], data []byte) (any, error) {
	var v T
	return &v, c.Decode(data, &v)
}
