package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
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

// TestEmbeddingsEncodeAsTheSpecSays: vectors are written and read a block
// at a time (third_party/forked/avro patch 2); the bytes are the
// specification's (blocks of 100 with their count and byte size, as the
// generic array codec writes them), another decoder reads them, and they
// come back as they went, at every length around a block's.
func TestEmbeddingsEncodeAsTheSpecSays(t *testing.T) {
	small, err := RawDocuments.Encode(&RawDocument{PK: "p", Action: ActionUpsert, Embeddings: []Embedding{{Name: "v", Vector: []float32{1.5, -2}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The vector: count -2 (zig-zag 3), byte size 8 (16), two floats, the
	// end block (0); then the document's end.
	want := []byte{0x03, 0x10, 0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0, 0x00}
	if !bytes.Contains(small, want) {
		t.Fatalf("the vector [1.5 -2] is not written as the spec's blocks %x:\n%x", want, small)
	}
	sch, err := Current(RawDocumentName)
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := json.Unmarshal([]byte(sch.Text), &schema); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 99, 100, 101, 250} {
		vec := make([]float32, n)
		for i := range vec {
			vec[i] = float32(i)*0.25 - 3
		}
		doc := RawDocument{PK: "p", Action: ActionUpsert, Timestamp: time.UnixMilli(1).UTC(), Embeddings: []Embedding{{Name: "v", Vector: vec}, {Name: "w", Vector: []float32{7}}}}
		data, err := RawDocuments.Encode(&doc)
		if err != nil {
			t.Fatal(err)
		}
		var back RawDocument
		if err := RawDocuments.Decode(data, &back); err != nil {
			t.Fatal(err)
		}
		if len(back.Embeddings) != 2 || !slices.Equal(back.Embeddings[0].Vector, vec) || !slices.Equal(back.Embeddings[1].Vector, []float32{7}) {
			t.Fatalf("%d floats: decoded %+v", n, back.Embeddings)
		}
		d := &specDecoder{b: data[10:], named: map[string]any{}}
		out, err := d.value(schema, "")
		if err != nil || len(d.b) != 0 {
			t.Fatalf("%d floats: the independent decoder: %v, %d bytes left", n, err, len(d.b))
		}
		got := out.(map[string]any)["embeddings"].([]any)[0].(map[string]any)["vector"].([]any)
		if len(got) != n || (n > 0 && got[n-1] != any(float64(vec[n-1]))) {
			t.Fatalf("%d floats: the independent decoder read %d, the last %v", n, len(got), got[len(got)-1:])
		}
	}
}

// TestMissHooksAreEachProcesss: Writer asks every hook added, in turn,
// about a schema it does not know, and no longer one removed (a process
// that stopped).
func TestMissHooksAreEachProcesss(t *testing.T) {
	var a, b int
	removeA := AddMissHook(func() bool { a++; return false })
	removeB := AddMissHook(func() bool { b++; return false })
	unknown := []byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0}
	if _, _, err := Writer(unknown); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("unknown schema: %v", err)
	}
	removeA()
	if _, _, err := Writer(unknown); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("unknown schema: %v", err)
	}
	removeB()
	if _, _, err := Writer(unknown); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("unknown schema: %v", err)
	}
	if a != 1 || b != 2 {
		t.Errorf("hooks called %d and %d times, want 1 (removed after one miss) and 2", a, b)
	}
}
