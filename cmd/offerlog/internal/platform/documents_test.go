package platform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/offerlog/offerlog/schemas/proto/documentv1"
)

// pbDoc is docBody's document as indexing.md's RawDocument.
func pbDoc(pk string, version int64) *documentv1.RawDocument {
	ts, _ := time.Parse(time.RFC3339Nano, docTime)
	return &documentv1.RawDocument{Pk: pk, Version: version, Epoch: 1, Action: documentv1.Action_UPSERT, Timestamp: timestamppb.New(ts),
		Fields: []*documentv1.Field{
			{Name: "tags", Value: &documentv1.Field_StringList{StringList: &documentv1.StringList{Values: []string{"a", "b"}}}},
			{Name: "title", Value: &documentv1.Field_String_{String_: "bike " + string(rune('0'+version))}},
			{Name: "price", Value: &documentv1.Field_Int64{Int64: 120}},
		},
		Embeddings: []*documentv1.Embedding{{Name: "vec", Vector: []float32{0.5, 1}}}}
}

// TestRawDocumentsInProtobuf: the seed's RawDocument is taken over HTTP
// (application/x-protobuf) and gRPC (DocumentService.Send), answered with
// the verdict as JSON posts are, and makes the same record as the JSON
// document.
func TestRawDocumentsInProtobuf(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	p := start(t, t.TempDir())
	s, b := call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), epochBody)
	expect(t, "register epoch", s, b, http.StatusCreated, `"epoch":1`)

	post := func(doc *documentv1.RawDocument) (int, string) {
		data, err := proto.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(p.url("/v1/clients/shop/documents"), "application/x-protobuf", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	s, b = post(pbDoc("p1", 1))
	expect(t, "a protobuf post", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	s, b = post(pbDoc("p1", 1))
	expect(t, "the same again", s, b, http.StatusOK, `duplicate`)
	s, b = post(pbDoc("p1", 0))
	expect(t, "an older version", s, b, http.StatusConflict, `"verdict":"STALE"`)
	bad := pbDoc("p1", 2)
	bad.Fields[2].Value = &documentv1.Field_String_{String_: "cheap"}
	s, b = post(bad)
	expect(t, "a field of the wrong type", s, b, http.StatusUnprocessableEntity, `price`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents"), docBody("j1", 1, ""))
	expect(t, "the same document as JSON", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	resp, err := http.Post(p.url("/v1/clients/shop/documents"), "application/x-protobuf", strings.NewReader("\xff\xff not protobuf"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	expect(t, "bytes that are not a RawDocument", resp.StatusCode, string(body), http.StatusBadRequest, `RawDocument`)
	// Both forms make one record: the same fields, whichever the form.
	_, fromPB := call(t, "GET", p.url("/v1/clients/shop/documents/p1"), "")
	_, fromJSON := call(t, "GET", p.url("/v1/clients/shop/documents/j1"), "")
	content := func(record string) string {
		var r struct {
			Epoch, Version     int64
			Timestamp          string
			Fields, Embeddings json.RawMessage
		}
		if err := json.Unmarshal([]byte(record), &r); err != nil {
			t.Fatalf("%v: %s", err, record)
		}
		out, _ := json.Marshal(r)
		return string(out)
	}
	if a, b := content(fromPB), content(fromJSON); a != b {
		t.Errorf("the protobuf document's record\n%s\ndiffers from the JSON one's\n%s", a, b)
	}

	cc, err := grpc.NewClient(p.info.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	docs := documentv1.NewDocumentServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := docs.Send(ctx, &documentv1.SendRequest{Client: "shop", Document: pbDoc("g1", 1)})
	if err != nil || res.GetVerdict() != documentv1.Verdict_ACCEPTED {
		t.Fatalf("Send: %v %v", res, err)
	}
	res, err = docs.Send(ctx, &documentv1.SendRequest{Client: "shop", Document: pbDoc("g1", 0)})
	if err != nil || res.GetVerdict() != documentv1.Verdict_STALE || res.GetReason() == "" {
		t.Errorf("Send of an older version: %v %v", res, err)
	}
	res, err = docs.Send(ctx, &documentv1.SendRequest{Client: "shop", Document: pbDoc("g2", 1), Async: true, Priority: documentv1.Priority_PRIORITY_URGENT})
	if err != nil || res.GetVerdict() != documentv1.Verdict_VERDICT_UNSPECIFIED || res.GetOffset() < 0 {
		t.Errorf("an async urgent Send: %v %v", res, err)
	}
	if _, err = docs.Send(ctx, &documentv1.SendRequest{Client: "shop", Document: bad}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "price") {
		t.Errorf("Send of a field of the wrong type: %v", err)
	}
	if _, err = docs.Send(ctx, &documentv1.SendRequest{Client: "Bad!", Document: pbDoc("g3", 1)}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Send for a bad client name: %v", err)
	}
}
