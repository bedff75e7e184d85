package drafts

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Group is the drafts group; its table is Table.
const Group goka.Group = "drafts"

// Table is the drafts group's table (topic drafts-table).
var Table = goka.GroupTable(Group)

// TableCodec is the codec of the table's values (*schemas.DraftRecord).
var TableCodec goka.Codec = streams.Table[schemas.DraftRecord]{C: schemas.DraftRecords}

var (
	commands = goka.Stream(topics.DraftsCommands)
	results  = goka.Stream(topics.DraftsResults)
	dead     = goka.Stream(topics.OffersDead)
)

// Metrics of the drafts group.
type Metrics struct {
	Outcomes *metrics.CounterVec // by kind and outcome
}

// NewMetrics registers the drafts group's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{Outcomes: r.Counter("offerlog_drafts_outcomes_total", "Draft commands by kind and outcome.", "kind", "outcome")}
}

// Graph returns the drafts group's graph.
func Graph(m *Metrics) *goka.GroupGraph {
	h := &handler{m: m}
	return goka.DefineGroup(Group,
		goka.Input(commands, new(codec.Bytes), h.command),
		goka.Persist(TableCodec),
		goka.Output(results, streams.Avro[schemas.DraftResult]{C: schemas.DraftResults}),
		goka.Output(dead, streams.Avro[schemas.DeadLetter]{C: schemas.DeadLetters}),
	)
}

type handler struct{ m *Metrics }

func (h *handler) command(ctx goka.Context, msg any) {
	data, _ := msg.([]byte)
	var c schemas.DraftCommand
	if err := schemas.DraftCommands.Decode(data, &c); err != nil {
		h.reject(ctx, data, &c, fmt.Sprintf("undecodable draft command: %v", err))
		return
	}
	if err := check(&c, ctx.Key()); err != nil {
		h.reject(ctx, data, &c, err.Error())
		return
	}
	var cur *schemas.Draft
	if r := streams.TableValue[schemas.DraftRecord](ctx, dead); r != nil {
		cur = &r.Draft
	}
	at := ctx.Timestamp()
	switch c.Kind {
	case schemas.DraftCurrent:
		if c.Anon != "" && c.User != "" {
			// The first step of a hand-over: the anonymous draft, as it is.
			h.reply(ctx, &c, ctx.Partition(), ctx.Offset(), schemas.OutcomeOK, "", cur)
			return
		}
		h.current(ctx, &c, nil, cur, ctx.Partition(), ctx.Offset())
	case schemas.DraftHand:
		h.current(ctx, &c, c.Draft, cur, ctx.Partition(), ctx.Offset())
	case schemas.DraftSave:
		next, outcome, reason := Save(cur, c.Draft, ctx.Key(), at)
		if next != nil {
			ctx.SetValue(&schemas.DraftRecord{Draft: *next})
		}
		h.reply(ctx, &c, ctx.Partition(), ctx.Offset(), outcome, reason, next)
	case schemas.DraftDiscard:
		if cur != nil && cur.ID == c.ExpectedID {
			ctx.Delete()
			h.reply(ctx, &c, ctx.Partition(), ctx.Offset(), schemas.OutcomeOK, "", nil)
			return
		}
		h.reply(ctx, &c, ctx.Partition(), ctx.Offset(), schemas.OutcomeIgnored, "no such draft", nil)
	}
}

func (h *handler) current(ctx goka.Context, c *schemas.DraftCommand, anon, user *schemas.Draft, p int32, o int64) {
	if c.User == "" {
		anon, user = user, nil // keyed by the anonymous owner: its draft is cur
	}
	own := user
	if c.User == "" {
		own = anon
	}
	d := Resolve(anon, user, c.Category, ctx.Key(), c.NewID, ctx.Timestamp())
	if own == nil || d.ID != own.ID || d.Version != own.Version {
		ctx.SetValue(&schemas.DraftRecord{Draft: *d})
	}
	h.reply(ctx, c, p, o, schemas.OutcomeOK, "", d)
}

// check returns why c cannot be carried out under key, or nil.
func check(c *schemas.DraftCommand, key string) error {
	for _, id := range []string{c.Anon, c.User} {
		if id != "" && offers.ValidSeller(id) != nil {
			return fmt.Errorf("owner id %q: want 1-64 characters of A-Z, a-z, 0-9, '_', '.' or '-'", id)
		}
	}
	switch c.Kind {
	case schemas.DraftCurrent, schemas.DraftHand:
		if c.Anon == "" && c.User == "" {
			return fmt.Errorf("no owner")
		}
		if !offers.ValidID(c.NewID) {
			return fmt.Errorf("new_id %q is not an offer id", c.NewID)
		}
	case schemas.DraftSave, schemas.DraftDiscard:
	default:
		return fmt.Errorf("unknown kind %q", c.Kind)
	}
	want := Key(c)
	if c.Kind == schemas.DraftHand {
		want = UserKey(c.User)
	}
	if key != want {
		return fmt.Errorf("key %q, want %q for this command", key, want)
	}
	return nil
}

func (h *handler) reply(ctx goka.Context, c *schemas.DraftCommand, p int32, o int64, outcome schemas.Outcome, reason string, d *schemas.Draft) {
	ctx.Emit(results, ctx.Key(), &schemas.DraftResult{Owner: ctx.Key(), SourcePartition: p, SourceOffset: o,
		Outcome: outcome, Reason: reason, Draft: d})
	h.m.Outcomes.With(string(c.Kind), string(outcome)).Inc()
}

func (h *handler) reject(ctx goka.Context, data []byte, c *schemas.DraftCommand, reason string) {
	ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(string(Group), string(ctx.Topic()),
		ctx.Partition(), ctx.Offset(), []byte(ctx.Key()), data, ctx.Timestamp(), reason))
	kind := string(c.Kind)
	if kind == "" || strings.ContainsAny(kind, " \n") {
		kind = "undecodable"
	}
	ctx.Emit(results, ctx.Key(), &schemas.DraftResult{Owner: ctx.Key(), SourcePartition: ctx.Partition(), SourceOffset: ctx.Offset(),
		Outcome: schemas.OutcomeInvalid, Reason: reason})
	h.m.Outcomes.With(kind, string(schemas.OutcomeInvalid)).Inc()
}

// Config of the drafts group.
type Config struct {
	Streams streams.Config
	Metrics *Metrics
	OnReady func()
}

func (c *Config) graph() *goka.GroupGraph {
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
	return Graph(c.Metrics)
}

// Run runs the drafts group until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	return streams.RunProcessor(ctx, cfg.Streams, cfg.graph(), cfg.OnReady)
}

// Replay rebuilds the drafts table from drafts.commands. The group must not
// be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	return streams.ReplayGroup(ctx, cfg.Streams, cfg.graph, partitions, replication)
}

// NewResults returns the matcher of the drafts group's answers; run it
// (Run) before the first command whose answer is awaited.
func NewResults(log *slog.Logger) *streams.Replies[schemas.DraftResult] {
	return streams.NewReplies(topics.DraftsResults, 10*time.Second, log, func(b []byte) (schemas.DraftResult, streams.RequestID, error) {
		var r schemas.DraftResult
		err := schemas.DraftResults.Decode(b, &r)
		return r, streams.RequestID{Partition: r.SourcePartition, Offset: r.SourceOffset}, err
	})
}
