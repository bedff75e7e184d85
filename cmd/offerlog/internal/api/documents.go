package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/documentv1"
	"github.com/offerlog/offerlog/topics"
)

// fromProto converts indexing.md's RawDocument (protobuf) to the one form
// offerlog keeps, fields and embeddings sorted by name as the JSON path
// does, so both give the same record.
func fromProto(d *documentv1.RawDocument) (*schemas.RawDocument, *FieldError) {
	if d == nil {
		return nil, fieldErr("document", "required")
	}
	if d.GetPk() == "" {
		return nil, fieldErr("pk", "required")
	}
	var action schemas.Action
	switch d.GetAction() {
	case documentv1.Action_UPSERT:
		action = schemas.ActionUpsert
	case documentv1.Action_DELETE:
		action = schemas.ActionDelete
	default:
		return nil, fieldErr("action", "want UPSERT or DELETE, got %s", d.GetAction())
	}
	if d.GetTimestamp() == nil {
		return nil, fieldErr("timestamp", "required")
	}
	if err := d.GetTimestamp().CheckValid(); err != nil {
		return nil, fieldErr("timestamp", "%v", err)
	}
	doc := &schemas.RawDocument{PK: d.GetPk(), Version: d.GetVersion(), Epoch: d.GetEpoch(), Action: action,
		Timestamp: d.GetTimestamp().AsTime().UTC().Truncate(time.Millisecond), TTLSeconds: d.GetTtlSeconds(),
		Fields: make([]schemas.Field, 0, len(d.GetFields())), Embeddings: make([]schemas.Embedding, 0, len(d.GetEmbeddings()))}
	for i, f := range d.GetFields() {
		out := schemas.Field{Name: f.GetName()}
		switch v := f.GetValue().(type) {
		case *documentv1.Field_String_:
			out.String = &v.String_
		case *documentv1.Field_Int64:
			out.Int64 = &v.Int64
		case *documentv1.Field_Double:
			if math.IsNaN(v.Double) || math.IsInf(v.Double, 0) {
				return nil, fieldErr("fields."+f.GetName(), "not a finite number")
			}
			out.Double = &v.Double
		case *documentv1.Field_Bool:
			out.Bool = &v.Bool
		case *documentv1.Field_StringList:
			out.StringList = slices.Clone(v.StringList.GetValues())
			if out.StringList == nil {
				out.StringList = []string{}
			}
		default:
			return nil, fieldErr(fmt.Sprintf("fields[%d]", i), "no value")
		}
		doc.Fields = append(doc.Fields, out)
	}
	for _, e := range d.GetEmbeddings() {
		for i, x := range e.GetVector() {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fieldErr(fmt.Sprintf("embeddings.%s[%d]", e.GetName(), i), "not a finite 32-bit float")
			}
		}
		doc.Embeddings = append(doc.Embeddings, schemas.Embedding{Name: e.GetName(), Vector: slices.Clone(e.GetVector())})
	}
	slices.SortStableFunc(doc.Fields, func(a, b schemas.Field) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(doc.Embeddings, func(a, b schemas.Embedding) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(doc.Fields); i++ {
		if doc.Fields[i].Name == doc.Fields[i-1].Name {
			return nil, fieldErr("fields."+doc.Fields[i].Name, "given twice")
		}
	}
	for i := 1; i < len(doc.Embeddings); i++ {
		if doc.Embeddings[i].Name == doc.Embeddings[i-1].Name {
			return nil, fieldErr("embeddings."+doc.Embeddings[i].Name, "given twice")
		}
	}
	return doc, nil
}

// RegisterGRPC registers the document service (offerlog.document.v1) on
// srv: the receiver of the HTTP API, over gRPC.
func (s *Server) RegisterGRPC(srv *grpc.Server) {
	documentv1.RegisterDocumentServiceServer(srv, documentService{s: s})
}

type documentService struct {
	documentv1.UnimplementedDocumentServiceServer
	s *Server
}

// Send appends a document and answers its verdict: ACCEPTED, STALE or
// INVALID are answers, not errors; a document refused before it is
// appended is INVALID_ARGUMENT naming the field.
func (d documentService) Send(ctx context.Context, req *documentv1.SendRequest) (*documentv1.SendResponse, error) {
	client := req.GetClient()
	if err := topics.ValidateClient(client); err != nil {
		return nil, status.Error(codes.InvalidArgument, "client: "+err.Error())
	}
	if err := auth.FromContext(ctx).Check(auth.Client, client); err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	doc, fe := fromProto(req.GetDocument())
	if fe != nil {
		return nil, status.Error(codes.InvalidArgument, fe.Error())
	}
	res, code, err := d.s.submit(ctx, submission{client: client, doc: doc, async: req.GetAsync(),
		urgent: req.GetPriority() == documentv1.Priority_PRIORITY_URGENT})
	if err != nil {
		msg := err.Error()
		if res.Offset >= 0 {
			msg = fmt.Sprintf("%s (partition %d, offset %d)", msg, res.Partition, res.Offset)
		}
		return nil, status.Error(grpcCode(code), msg)
	}
	out := &documentv1.SendResponse{Partition: res.Partition, Offset: res.Offset, Reason: res.Reason}
	switch schemas.Decision(res.Verdict) {
	case schemas.Accepted:
		out.Verdict = documentv1.Verdict_ACCEPTED
	case schemas.Stale:
		out.Verdict = documentv1.Verdict_STALE
	case schemas.Invalid:
		out.Verdict = documentv1.Verdict_INVALID
	}
	return out, nil
}

// grpcCode is the gRPC code of an HTTP status of submit.
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusUnprocessableEntity, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return codes.InvalidArgument
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}
