package offerapi

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/offerv1"
)

// RegisterGRPC registers the service as offerlog.offer.v1.OfferService on s.
func (s *Service) RegisterGRPC(g *grpc.Server) {
	offerv1.RegisterOfferServiceServer(g, &grpcServer{s: s})
}

type grpcServer struct {
	offerv1.UnimplementedOfferServiceServer
	s *Service
}

// grpcErr maps a service error to a gRPC status.
func grpcErr(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return status.Error(codes.Internal, err.Error())
	}
	code := map[Kind]codes.Code{Invalid: codes.InvalidArgument, NotFound: codes.NotFound,
		Conflict: codes.FailedPrecondition, Unavailable: codes.Unavailable, Timeout: codes.DeadlineExceeded,
		Forbidden: codes.PermissionDenied}[e.Kind]
	return status.Error(code, e.Error())
}

func (g *grpcServer) CurrentDraft(ctx context.Context, r *offerv1.CurrentDraftRequest) (*offerv1.Draft, error) {
	d, err := g.s.CurrentDraft(ctx, r.Anon, r.User, r.Category)
	if err != nil {
		return nil, grpcErr(err)
	}
	return draftPB(d), nil
}

func (g *grpcServer) SaveDraft(ctx context.Context, r *offerv1.SaveDraftRequest) (*offerv1.Draft, error) {
	d, err := g.s.SaveDraft(ctx, r.Anon, r.User, r.DraftId, offerv1.ToOffer(r.Offer))
	if err != nil {
		return nil, grpcErr(err)
	}
	return draftPB(d), nil
}

func (g *grpcServer) PublishDraft(ctx context.Context, r *offerv1.PublishDraftRequest) (*offerv1.OfferVersion, error) {
	o, err := g.s.PublishDraft(ctx, r.User, r.DraftId, r.Version)
	if err != nil {
		return nil, grpcErr(err)
	}
	return versionPB(o), nil
}

func (g *grpcServer) GetOffer(ctx context.Context, r *offerv1.GetOfferRequest) (*offerv1.OfferVersion, error) {
	o, err := g.s.Offer(ctx, r.Id, r.MinVersion)
	if err != nil {
		return nil, grpcErr(err)
	}
	return versionPB(o), nil
}

func (g *grpcServer) UpdateOffer(ctx context.Context, r *offerv1.UpdateOfferRequest) (*offerv1.OfferVersion, error) {
	if r.Offer == nil {
		return nil, status.Error(codes.InvalidArgument, "offer: required")
	}
	o, err := g.s.Update(ctx, r.SellerId, r.Id, r.ExpectedVersion, offerv1.ToOffer(r.Offer))
	if err != nil {
		return nil, grpcErr(err)
	}
	return versionPB(o), nil
}

func (g *grpcServer) DeleteOffer(ctx context.Context, r *offerv1.DeleteOfferRequest) (*offerv1.DeleteOfferResponse, error) {
	v, err := g.s.Delete(ctx, r.SellerId, r.Id, r.ExpectedVersion)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &offerv1.DeleteOfferResponse{Version: v}, nil
}

func (g *grpcServer) ListOffers(ctx context.Context, r *offerv1.ListOffersRequest) (*offerv1.ListOffersResponse, error) {
	p, err := g.s.List(ctx, r.SellerId, r.Preset, r.PageToken, int(r.Limit))
	if err != nil {
		return nil, grpcErr(err)
	}
	out := &offerv1.ListOffersResponse{NextPageToken: p.NextPageToken, Total: p.Total}
	for _, o := range p.Offers {
		out.Offers = append(out.Offers, versionPB(o))
	}
	return out, nil
}

func (g *grpcServer) GetCounters(ctx context.Context, r *offerv1.GetCountersRequest) (*offerv1.Counters, error) {
	c, err := g.s.Counters(ctx, r.SellerId)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &offerv1.Counters{SellerId: c.SellerID, Presets: countsMap(c.Presets), Active: c.Active, Expired: c.Expired,
		Banned: c.Banned, Sold: c.Sold, MoneyEarned: c.MoneyEarned}, nil
}

func ms(t time.Time) int64 { return offerv1.Millis(t) }

func versionPB(o *OfferVersion) *offerv1.OfferVersion {
	return &offerv1.OfferVersion{Offer: offerv1.FromOffer(&o.Offer), Version: o.Version, Banned: o.Banned, BanReasons: o.BanReasons,
		Archived: o.Archived}
}

func draftPB(d *schemas.Draft) *offerv1.Draft {
	return &offerv1.Draft{Id: d.ID, Owner: d.Owner, Category: d.Category, Offer: offerv1.FromOffer(&d.Offer),
		UpdatedAtMs: ms(d.UpdatedAt), Version: d.Version}
}

func countsMap(c schemas.Counts) map[string]int64 {
	m := make(map[string]int64, len(c))
	for _, x := range c {
		m[x.Name] = x.Count
	}
	return m
}
