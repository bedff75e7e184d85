package api

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/topics"
)

// SearchMethod is the search's gRPC method. Its request and answer are
// google.protobuf.Struct, the JSON of the HTTP route in protobuf's
// well-known form: {"client": C, "query": {...}} in, the answer out (any
// gRPC client, grpcurl included, calls it without offerlog's .proto).
const SearchMethod = "/offerlog.search.v1.SearchService/Search"

type searchServer interface {
	Search(context.Context, *structpb.Struct) (*structpb.Struct, error)
}

var searchServiceDesc = grpc.ServiceDesc{
	ServiceName: "offerlog.search.v1.SearchService",
	HandlerType: (*searchServer)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Search", Handler: func(srv any, ctx context.Context, dec func(any) error,
		interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(structpb.Struct)
		if err := dec(in); err != nil {
			return nil, err
		}
		s := srv.(searchServer)
		if interceptor == nil {
			return s.Search(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: SearchMethod},
			func(ctx context.Context, req any) (any, error) { return s.Search(ctx, req.(*structpb.Struct)) })
	}}},
	Metadata: "offerlog/search/v1",
}

// RegisterSearchGRPC registers the search (SearchMethod) on srv.
func (s *Server) RegisterSearchGRPC(srv *grpc.Server) {
	srv.RegisterService(&searchServiceDesc, searchService{s: s})
}

type searchService struct{ s *Server }

func (g searchService) Search(ctx context.Context, in *structpb.Struct) (*structpb.Struct, error) {
	var req struct {
		Client string       `json:"client"`
		Query  search.Query `json:"query"`
	}
	raw, err := in.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "want {\"client\": C, \"query\": {...}}: "+err.Error())
	}
	if err := topics.ValidateClient(req.Client); err != nil {
		return nil, status.Error(codes.InvalidArgument, "client: "+err.Error())
	}
	if err := auth.FromContext(ctx).Check(auth.Client, req.Client); err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	if g.s.cfg.Search == nil {
		return nil, status.Error(codes.Unavailable, "no searcher")
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		ctx = search.WithToken(ctx, md.Get("authorization")[0])
	}
	res, err := g.s.cfg.Search.Search(ctx, req.Client, req.Query)
	var qe *search.QueryError
	var we *search.WaitError
	switch {
	case err == nil:
	case errors.As(err, &qe):
		return nil, status.Error(codes.InvalidArgument, qe.Error())
	case errors.Is(err, search.ErrUnknownClient):
		return nil, status.Error(codes.NotFound, err.Error())
	case errors.As(err, &we):
		return nil, status.Error(codes.DeadlineExceeded, "after: "+we.Error())
	default:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	data, err := json.Marshal(res)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := new(structpb.Struct)
	if err := out.UnmarshalJSON(data); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return out, nil
}
