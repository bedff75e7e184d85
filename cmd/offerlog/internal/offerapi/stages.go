package offerapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
)

// StageState returns a stage's state of offer id and its version.
func (s *Service) StageState(ctx context.Context, id, stage string) (*schemas.StageState, error) {
	if err := offers.ValidStage(stage); err != nil {
		return nil, errorf(Invalid, "stage", "%v", err)
	}
	if err := auth.FromContext(ctx).Check(auth.Stage, stage); err != nil {
		return nil, &Error{Kind: Forbidden, Field: "stage", Reason: err.Error()}
	}
	r, err := s.record(ctx, id)
	if err != nil {
		return nil, err
	}
	st, _ := offers.StageOf(r, stage)
	return &st, nil
}

// UpdateStageState replaces a stage's state of offer id if it is still at
// st.Version (compare-and-set); it returns whether it did and the version
// the state is at.
func (s *Service) UpdateStageState(ctx context.Context, id, stage string, st *schemas.StageState) (bool, int64, error) {
	if err := offers.ValidStage(stage); err != nil {
		return false, 0, errorf(Invalid, "stage", "%v", err)
	}
	if err := auth.FromContext(ctx).Check(auth.Stage, stage); err != nil {
		return false, 0, &Error{Kind: Forbidden, Field: "stage", Reason: err.Error()}
	}
	if e := checkID(id, "offer_id", "an offer id"); e != nil {
		return false, 0, e
	}
	res, err := s.cfg.Offers.Do(ctx, &schemas.OfferCommand{Kind: schemas.CommandStateCAS, OfferID: id, ExpectedVersion: -1,
		ReadVersion: -1, Stage: stage, State: st})
	if err != nil {
		return false, 0, answerErr(err)
	}
	switch res.Outcome {
	case schemas.OutcomeOK:
		return true, res.Version, nil
	case schemas.OutcomeConflict:
		return false, res.Version, nil
	}
	return false, 0, outcomeErr(res)
}

// RegisterStageStates registers the stage state API (offerlog.stage.v1.StageStates) on g.
func (s *Service) RegisterStageStates(g *grpc.Server) {
	stagev1.RegisterStageStatesServer(g, &stateServer{s: s})
}

type stateServer struct {
	stagev1.UnimplementedStageStatesServer
	s *Service
}

func (g *stateServer) Read(ctx context.Context, r *stagev1.ReadStateRequest) (*stagev1.State, error) {
	st, err := g.s.StageState(ctx, r.OfferId, r.Stage)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &stagev1.State{TypeUrl: st.TypeURL, Value: st.Value, Version: st.Version}, nil
}

func (g *stateServer) Update(ctx context.Context, r *stagev1.UpdateStateRequest) (*stagev1.UpdateStateResponse, error) {
	if r.State == nil {
		return nil, status.Error(codes.InvalidArgument, "state: required")
	}
	ok, v, err := g.s.UpdateStageState(ctx, r.OfferId, r.Stage, &schemas.StageState{Stage: r.Stage, TypeURL: r.State.TypeUrl,
		Value: r.State.Value, Version: r.State.Version})
	if err != nil {
		return nil, grpcErr(err)
	}
	return &stagev1.UpdateStateResponse{Updated: ok, Version: v}, nil
}
