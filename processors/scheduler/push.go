package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// PushGroup is the consumer group of a stage's push hook.
func PushGroup(stage string) string { return "scheduler-push-" + stage }

// Push is the body of a push hook's POST: a stage's result, once saved.
// DedupKey is the same for every delivery of one result (deliveries are at
// least once); it is also the Idempotency-Key header.
type Push struct {
	DedupKey     string             `json:"dedup_key"`
	Stage        string             `json:"stage"`
	OfferVersion int64              `json:"offer_version"`
	State        schemas.StageState `json:"state"`
	Changed      bool               `json:"changed"`
	At           time.Time          `json:"at"`
	Offer        schemas.Offer      `json:"offer"`
}

// DedupKey names one saved result of a stage: the offer, the stage and the
// version of the stage's state the result wrote.
func DedupKey(e *schemas.StageEffect) string {
	return e.Offer.ID + "/" + e.Stage + "/" + strconv.FormatInt(e.State.Version, 10)
}

// pusher delivers a stage's effects to its push_url after they are saved:
// it reads scheduler.effects (the stage's own), waits until the offers view
// shows the offer at the effect's version or later (the result is in the
// table), and POSTs the result; a failed POST is retried with backoff, and
// one failing too long goes to scheduler.dead with the reason. An effect is
// committed once delivered.
type pusher struct {
	cfg  StageConfig
	view *goka.View
	http *http.Client
	log  *slog.Logger
}

func (p *pusher) run(ctx context.Context, brokers []string, prod *kgo.Client, m *Metrics) error {
	return streams.RunLoop(ctx, streams.LoopConfig{Brokers: brokers, Group: PushGroup(p.cfg.Name), Topics: []string{topics.SchedulerEffects},
		DeadTopic: topics.SchedulerDead, Producer: prod, Logger: p.log, Metrics: m.Loop, Concurrency: p.cfg.MaxParallelism,
		Backoff: streams.Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second, Attempts: 20},
		Timeout: time.Minute, Handler: p.push})
}

func (p *pusher) push(ctx context.Context, r *kgo.Record) error {
	var e schemas.StageEffect
	if err := schemas.StageEffects.Decode(r.Value, &e); err != nil {
		return streams.Permanentf("undecodable effect: %v", err)
	}
	if e.Stage != p.cfg.Name {
		return nil
	}
	rec, err := p.saved(ctx, &e)
	if err != nil {
		return err
	}
	// scheduler.effects carries the state's version only; its contents,
	// private to the stage, come from the table.
	if st, _ := offers.StageOf(rec, e.Stage); st.Version == e.State.Version {
		e.State = st
	}
	body, err := json.Marshal(Push{DedupKey: DedupKey(&e), Stage: e.Stage, OfferVersion: e.Version, State: e.State,
		Changed: e.Changed, At: e.At, Offer: e.Offer})
	if err != nil {
		return streams.Permanentf("encode the push: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.PushURL, bytes.NewReader(body))
	if err != nil {
		return streams.Permanentf("push request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", DedupKey(&e))
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("push %s: %w", DedupKey(&e), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("push %s: %s answered %s", DedupKey(&e), p.cfg.PushURL, resp.Status)
	}
	return nil
}

// saved waits until the view holds the offer at the effect's version or
// later: the result the effect reports is in the table.
func (p *pusher) saved(ctx context.Context, e *schemas.StageEffect) (*schemas.OfferRecord, error) {
	return awaitRecord(ctx, p.view, e.Offer.ID, func(rec *schemas.OfferRecord) bool { return rec.Version >= e.Version })
}

// awaitRecord polls the offers view until the record of id satisfies ok
// and returns it, or ctx's error.
func awaitRecord(ctx context.Context, view *goka.View, id string, ok func(*schemas.OfferRecord) bool) (*schemas.OfferRecord, error) {
	for {
		v, err := view.Get(id)
		if err != nil {
			return nil, err
		}
		if rec, isRec := v.(*schemas.OfferRecord); isRec && ok(rec) {
			return rec, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
