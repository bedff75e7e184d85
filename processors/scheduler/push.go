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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
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

// pusher delivers a stage's effects to its push hook after they are
// saved: it reads scheduler.effects (the stage's own), waits until the
// offers view shows the offer at the effect's version or later (the result
// is in the table), and hands the result, with the stage's state from the
// table, to its sink: a webhook (push_url) or the stage's push topic
// (push_topic). A failed delivery is retried with backoff, and one failing
// too long goes to scheduler.dead with the reason. An effect is committed
// once delivered.
type pusher struct {
	cfg  StageConfig
	view *table.View
	sink func(context.Context, *schemas.StageEffect) error
	log  *slog.Logger
}

// newPusher returns the push hook of stage cfg, or nil if it has none.
func newPusher(cfg StageConfig, view *table.View, prod *kgo.Client, log *slog.Logger) *pusher {
	p := &pusher{cfg: cfg, view: view, log: log}
	switch {
	case cfg.PushURL != "":
		p.sink = webhook(cfg.PushURL, &http.Client{Timeout: 30 * time.Second})
	case cfg.PushTopic:
		p.sink = topicSink(topics.PushTopic(cfg.Name), prod)
	default:
		return nil
	}
	return p
}

func (p *pusher) run(ctx context.Context, kafka *streams.Cluster, prod *kgo.Client, m *Metrics) error {
	return streams.RunLoop(ctx, streams.LoopConfig{Cluster: kafka, Group: PushGroup(p.cfg.Name), Topics: []string{topics.SchedulerEffects},
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
	return p.sink(ctx, &e)
}

// webhook POSTs each result to url as JSON (Push), with its dedup key in
// the Idempotency-Key header; an answer other than 2xx is a failure.
func webhook(url string, hc *http.Client) func(context.Context, *schemas.StageEffect) error {
	return func(ctx context.Context, e *schemas.StageEffect) error {
		body, err := json.Marshal(Push{DedupKey: DedupKey(e), Stage: e.Stage, OfferVersion: e.Version, State: e.State,
			Changed: e.Changed, At: e.At, Offer: e.Offer})
		if err != nil {
			return streams.Permanentf("encode the push: %v", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return streams.Permanentf("push request: %v", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", DedupKey(e))
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("push %s: %w", DedupKey(e), err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("push %s: %s answered %s", DedupKey(e), url, resp.Status)
		}
		return nil
	}
}

// DedupHeader is the header of a push topic's record holding its dedup key.
const DedupHeader = "dedup_key"

// topicSink writes each result to topic: the effect, Avro (StageEffect)
// with the stage's state in clear, keyed by the offer id, its dedup key in
// the dedup_key header. The write is acknowledged by every in-sync replica
// before the effect is committed.
func topicSink(topic string, prod *kgo.Client) func(context.Context, *schemas.StageEffect) error {
	return func(ctx context.Context, e *schemas.StageEffect) error {
		v, err := schemas.StageEffects.Encode(e)
		if err != nil {
			return streams.Permanentf("encode the push: %v", err)
		}
		r := &kgo.Record{Topic: topic, Key: []byte(e.Offer.ID), Value: v,
			Headers: []kgo.RecordHeader{{Key: DedupHeader, Value: []byte(DedupKey(e))}}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("push %s to %s: %w", DedupKey(e), topic, err)
		}
		return nil
	}
}

// saved waits until the view holds the offer at the effect's version or
// later: the result the effect reports is in the table.
func (p *pusher) saved(ctx context.Context, e *schemas.StageEffect) (*schemas.OfferRecord, error) {
	return awaitRecord(ctx, p.view, e.Offer.ID, func(rec *schemas.OfferRecord) bool { return rec.Version >= e.Version })
}

// awaitRecord polls the offers view until the record of id satisfies ok
// and returns it, or ctx's error.
func awaitRecord(ctx context.Context, view *table.View, id string, ok func(*schemas.OfferRecord) bool) (*schemas.OfferRecord, error) {
	for wait := firstPoll; ; wait = nextPoll(wait) {
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
		case <-time.After(wait):
		}
	}
}

// The view is asked again after firstPoll, then after twice as long each
// time, up to lastPoll. It usually trails the record that made the router
// or a worker ask (offers.events, a queue) by a fetch or two: a fixed 10 ms
// wait put 10 ms on most of a stage's items, and with max_parallelism
// items in flight bounded a stage at about 800 a second.
const (
	firstPoll = time.Millisecond
	lastPoll  = 10 * time.Millisecond
)

func nextPoll(wait time.Duration) time.Duration { return min(2*wait, lastPoll) }
