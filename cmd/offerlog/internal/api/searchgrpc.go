package api

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/schemas/proto/searchv1"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/topics"
)

// SearchMethod is the search's gRPC method (schemas/proto/search/v1).
const SearchMethod = searchv1.SearchService_Search_FullMethodName

// RegisterSearchGRPC registers the search (SearchMethod) on srv.
func (s *Server) RegisterSearchGRPC(srv *grpc.Server) {
	searchv1.RegisterSearchServiceServer(srv, searchService{s: s})
}

type searchService struct {
	searchv1.UnimplementedSearchServiceServer
	s *Server
}

// The messages are the HTTP route's JSON member for member (their proto
// names are its names): a request goes through that JSON into a
// search.Query, an answer from it, so that both routes take and give the
// same.
var (
	toJSON   = protojson.MarshalOptions{UseProtoNames: true}
	fromJSON = protojson.UnmarshalOptions{DiscardUnknown: true}
)

func (g searchService) Search(ctx context.Context, in *searchv1.SearchRequest) (*searchv1.SearchResponse, error) {
	var q search.Query
	if in.GetQuery() != nil {
		raw, err := toJSON.Marshal(in.GetQuery())
		if err == nil {
			err = json.Unmarshal(raw, &q)
		}
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, "query: "+err.Error())
		}
	}
	if err := topics.ValidateClient(in.GetClient()); err != nil {
		return nil, status.Error(codes.InvalidArgument, "client: "+err.Error())
	}
	if err := auth.FromContext(ctx).Check(auth.Client, in.GetClient()); err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	if g.s.cfg.Search == nil {
		return nil, status.Error(codes.Unavailable, "no searcher")
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		ctx = search.WithToken(ctx, md.Get("authorization")[0])
	}
	res, err := g.s.cfg.Search.Search(ctx, in.GetClient(), q)
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
	out := new(searchv1.SearchResponse)
	if err := fromJSON.Unmarshal(data, out); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return out, nil
}
