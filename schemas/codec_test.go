package schemas

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func sampleDocument() RawDocument {
	title, price := "bike", int64(120)
	return RawDocument{
		PK: "42", Version: 3, Epoch: 1, Action: ActionUpsert,
		Timestamp:  time.UnixMilli(1_700_000_000_123).UTC(),
		TTLSeconds: 60,
		Fields: []Field{
			{Name: "price", Int64: &price},
			{Name: "tags", StringList: []string{"a", "b"}},
			{Name: "title", String: &title},
		},
		Embeddings: []Embedding{{Name: "e", Vector: []float32{0.5, -1}}},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	in := sampleDocument()
	data, err := RawDocuments.Encode(&in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0xC3, 0x01}) {
		t.Fatalf("not single-object framed: % x", data[:4])
	}
	var out RawDocument
	if err := RawDocuments.Decode(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the document:\n in %+v\nout %+v", in, out)
	}
	again, err := RawDocuments.Encode(&out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Fatal("encoding is not deterministic")
	}
}

func TestCodecRejectsForeignData(t *testing.T) {
	var d RawDocument
	if err := RawDocuments.Decode([]byte(`{"pk":"1"}`), &d); !errors.Is(err, ErrNotFramed) {
		t.Fatalf("plain JSON: got %v, want ErrNotFramed", err)
	}
	unknown := append([]byte{0xC3, 0x01}, 1, 2, 3, 4, 5, 6, 7, 8, 0)
	if err := RawDocuments.Decode(unknown, &d); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("unknown fingerprint: got %v, want ErrUnknownSchema", err)
	}
	v := Verdict{Client: "c", PK: "p", Verdict: Accepted, Timestamp: time.UnixMilli(1)}
	data, err := Verdicts.Encode(&v)
	if err != nil {
		t.Fatal(err)
	}
	if err := RawDocuments.Decode(data, &d); err == nil {
		t.Fatal("decoding a Verdict as a RawDocument succeeded")
	}
}

// TestDecodeTakesTheWholeBody: a body cut short anywhere, or with bytes
// after its value, does not decode.
func TestDecodeTakesTheWholeBody(t *testing.T) {
	data, err := Verdicts.Encode(&Verdict{Client: "c", PK: "p", Verdict: Accepted, Reason: "fine", Timestamp: time.UnixMilli(1)})
	if err != nil {
		t.Fatal(err)
	}
	var v Verdict
	if err := Verdicts.Decode(data, &v); err != nil || v.Reason != "fine" {
		t.Fatalf("whole: %+v %v", v, err)
	}
	for n := 10; n < len(data); n++ {
		if err := Verdicts.Decode(data[:n], &v); err == nil {
			t.Fatalf("cut to %d of %d bytes: decoded %+v", n, len(data), v)
		}
	}
	if err := Verdicts.Decode(append(append([]byte(nil), data...), 0), &v); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("a byte after the value: %v", err)
	}
}

// TestConfluentFramingDecodes: a value in Confluent's framing (zero, the
// 4-byte registry id, the body) decodes like its single-object form; an
// unknown id is ErrUnknownSchema.
func TestConfluentFramingDecodes(t *testing.T) {
	s, err := Current(VerdictName)
	if err != nil {
		t.Fatal(err)
	}
	soe, err := Verdicts.Encode(&Verdict{Client: "c", PK: "p", Verdict: Stale, Timestamp: time.UnixMilli(5)})
	if err != nil {
		t.Fatal(err)
	}
	var v Verdict
	if err := Verdicts.Decode(FrameConfluent(s, soe[10:]), &v); err != nil || v.Verdict != Stale || v.PK != "p" {
		t.Fatalf("confluent-framed: %+v %v", v, err)
	}
	if got, err := ByID(s.ID); err != nil || got.Name != VerdictName {
		t.Fatalf("by id %d: %v %v", s.ID, got, err)
	}
	bad := FrameConfluent(&Schema{ID: 12345}, soe[10:])
	if err := Verdicts.Decode(bad, &v); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestAppendingToDecodedBytesLeavesTheRestAlone: a decoded []byte is cut
// from the Reader's slab like the strings decoded after it (and, with the
// Readers reused, the values of later decodes); appending to it must not
// write over them (third_party/forked/avro patch 1: the upstream slice kept the
// slab's capacity, and a stage's `append(st.Value, 'x')` changed the next
// stage's name).
func TestAppendingToDecodedBytesLeavesTheRestAlone(t *testing.T) {
	rec := OfferRecord{Offer: Offer{ID: "1", SellerID: "s", Title: "t", Currency: "RUB"}, Version: 1, Stages: []StageState{
		{Stage: "first", TypeURL: "count", Value: []byte("ab")},
		{Stage: "second", TypeURL: "count", Value: []byte("cd")},
	}}
	data, err := OfferRecords.Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	var got, later OfferRecord
	if err := OfferRecords.Decode(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := OfferRecords.Decode(data, &later); err != nil {
		t.Fatal(err)
	}
	grown := append(got.Stages[0].Value, "xxxxxxxx"...)
	grown2 := append(later.Stages[1].Value, "yyyyyyyy"...)
	for _, r := range []OfferRecord{got, later} {
		if r.Stages[1].Stage != "second" || r.Stages[1].TypeURL != "count" || string(r.Stages[1].Value) != "cd" {
			t.Fatalf("after appending to a decoded value the next stage reads %+v", r.Stages[1])
		}
		if r.DraftOwner != "" || r.Offer.Currency != "RUB" {
			t.Fatalf("after appending to a decoded value the record reads %+v", r)
		}
	}
	if string(grown) != "abxxxxxxxx" || string(grown2) != "cdyyyyyyyy" {
		t.Fatalf("appended values %q and %q", grown, grown2)
	}
}
