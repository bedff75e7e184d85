package drafts

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group is the drafts group; its table is Table.
const Group = "drafts"

// Table is the drafts group's table (topic drafts-table).
var Table = table.GroupTable(Group)

// TableCodec is the codec of the table's values (*schemas.DraftRecord).
var TableCodec streams.Codec = streams.Table[schemas.DraftRecord]{C: schemas.DraftRecords}

const (
	commands = topics.DraftsCommands
	results  = topics.DraftsResults
	dead     = topics.OffersDead
	// offerCommands receives the CREATE of a published draft, encoded.
	offerCommands = topics.OffersCommands
)

// Metrics of the drafts group.
type Metrics struct {
	Outcomes *metrics.CounterVec // by kind and outcome
	Recalled *metrics.Counter
}

// NewMetrics registers the drafts group's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Outcomes: r.Counter("offerlog_drafts_outcomes_total", "Draft commands by kind and outcome.", "kind", "outcome"),
		Recalled: r.Counter("offerlog_drafts_recalled_total", "Draft commands seen again after a crash and answered as the first time.").With(),
	}
}

// Graph returns the drafts group's graph; partitions is how many
// drafts.commands has (0: a command's placement is not checked).
func Graph(m *Metrics, partitions int32) *table.Graph {
	h := &handler{m: m, partitions: partitions}
	return &table.Graph{
		Group: Group, Codec: TableCodec, DeadTopic: dead,
		Inputs: []table.Input{{Topic: commands, Callback: h.command}},
		Outputs: []table.Output{
			{Topic: results, Codec: streams.Avro[schemas.DraftResult]{C: schemas.DraftResults}},
			{Topic: dead, Codec: streams.Avro[schemas.DeadLetter]{C: schemas.DeadLetters}},
			{Topic: offerCommands, Codec: streams.Bytes{}},
		},
	}
}

type handler struct {
	m          *Metrics
	partitions int32
}

func (h *handler) command(ctx table.Context, data []byte) {
	var c schemas.DraftCommand
	if reason := streams.Misplaced(ctx.Key(), ctx.Partition(), h.partitions); reason != "" {
		h.reject(ctx, data, &c, reason) // the owner's draft lives on another partition
		return
	}
	if err := schemas.DraftCommands.Decode(data, &c); err != nil {
		h.reject(ctx, data, &c, fmt.Sprintf("undecodable draft command: %v", err))
		return
	}
	if err := check(&c, ctx.Key()); err != nil {
		h.reject(ctx, data, &c, err.Error())
		return
	}
	rec := table.TableValue[schemas.DraftRecord](ctx, dead)
	if rec != nil {
		if rr, ok := table.Recall(rec.Recent, ctx.Partition(), ctx.Offset()); ok {
			// Written by this command before a crash, after the input's
			// last commit: answered as the first time, from the record.
			h.recall(ctx, &c, rec, rr)
			return
		}
	}
	var cur *schemas.Draft
	if rec != nil && !rec.Published {
		cur = &rec.Draft
	}
	at := ctx.Timestamp()
	switch c.Kind {
	case schemas.DraftCurrent:
		if c.Anon != "" && c.User != "" {
			// The first step of a hand-over: the anonymous draft, as it is.
			h.reply(ctx, &c, schemas.OutcomeOK, "", cur)
			return
		}
		h.current(ctx, &c, nil, cur, rec)
	case schemas.DraftHand:
		h.current(ctx, &c, c.Draft, cur, rec)
	case schemas.DraftSave:
		next, outcome, reason := Save(cur, c.Draft, ctx.Key(), at)
		if next != nil {
			h.write(ctx, &schemas.DraftRecord{Draft: *next}, outcome, reason)
		}
		h.reply(ctx, &c, outcome, reason, next)
	case schemas.DraftDiscard:
		// A discarded draft leaves no record (anonymous visitors' drafts
		// would pile up): a DISCARD processed again after a crash finds
		// none and is answered IGNORED, which the API takes as done.
		if cur != nil && cur.ID == c.ExpectedID {
			ctx.Delete()
			h.reply(ctx, &c, schemas.OutcomeOK, "", nil)
			return
		}
		h.reply(ctx, &c, schemas.OutcomeIgnored, "no such draft", nil)
	case schemas.DraftPublish:
		h.publish(ctx, &c, rec)
	}
}

// publish retires the owner's draft c.ExpectedID and emits the CREATE of its
// offer, in one write of the record: a repeated PUBLISH of the same draft
// (a retry, or a redelivery) finds it published, emits the CREATE again (the
// aggregate answers a CREATE of the same draft with the same content as
// done) and gets the same answer.
func (h *handler) publish(ctx table.Context, c *schemas.DraftCommand, rec *schemas.DraftRecord) {
	switch {
	case rec == nil || rec.Draft.ID != c.ExpectedID:
		h.reply(ctx, c, schemas.OutcomeNotFound, fmt.Sprintf("%s has no draft %s", ctx.Key(), c.ExpectedID), nil)
		return
	case rec.Published:
		table.Reassert(ctx, rec)
		h.emitCreate(ctx, &rec.Draft)
		h.reply(ctx, c, schemas.OutcomeOK, "published", &rec.Draft)
		return
	}
	o := Publication(&rec.Draft)
	if fe := offers.Validate(o); fe != nil {
		h.reply(ctx, c, schemas.OutcomeInvalid, fe.Field+": "+fe.Reason, &rec.Draft)
		return
	}
	h.write(ctx, &schemas.DraftRecord{Draft: rec.Draft, Published: true}, schemas.OutcomeOK, "published")
	h.emitCreate(ctx, &rec.Draft)
	h.reply(ctx, c, schemas.OutcomeOK, "published", &rec.Draft)
}

// Publication returns the offer a logged-in seller's draft d publishes.
func Publication(d *schemas.Draft) *schemas.Offer {
	o := d.Offer
	o.ID, o.SellerID, o.Status = d.ID, sellerOf(d.Owner), schemas.OfferActive
	return &o
}

// PublishCommand returns the CREATE of the offer of published draft d: the
// first id of the draft's chain (offers.NextID) is the draft's own.
func PublishCommand(d *schemas.Draft) *schemas.OfferCommand {
	o := Publication(d)
	return &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: d.ID, SellerID: o.SellerID, ExpectedVersion: -1,
		Offer: o, DraftOwner: d.Owner, DraftID: d.ID}
}

func (h *handler) emitCreate(ctx table.Context, d *schemas.Draft) {
	data, err := schemas.OfferCommands.Encode(PublishCommand(d))
	if err != nil { // a validated offer encodes: kept with the reason if not
		ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(Group, ctx.Topic(), ctx.Partition(), ctx.Offset(),
			[]byte(ctx.Key()), nil, ctx.Timestamp(), fmt.Sprintf("the CREATE of published draft %s does not encode: %v", d.ID, err)))
		return
	}
	ctx.Emit(offerCommands, d.ID, data)
}

// write sets next as the key's record, remembering the answer given to the
// command (table.Remember).
func (h *handler) write(ctx table.Context, next *schemas.DraftRecord, outcome schemas.Outcome, reason string) {
	next.Recent = table.Remember(schemas.RecentResult{Topic: ctx.Topic(), Partition: ctx.Partition(),
		Offset: ctx.Offset(), Outcome: string(outcome), Reason: reason, Version: next.Draft.Version})
	ctx.SetValue(next)
}

// recall answers a command its record remembers, reasserting the record and
// emitting again what the command emitted.
func (h *handler) recall(ctx table.Context, c *schemas.DraftCommand, rec *schemas.DraftRecord, rr schemas.RecentResult) {
	h.m.Recalled.Inc()
	table.Reassert(ctx, rec)
	if c.Kind == schemas.DraftPublish && rec.Published {
		h.emitCreate(ctx, &rec.Draft)
	}
	h.reply(ctx, c, schemas.Outcome(rr.Outcome), rr.Reason, &rec.Draft)
}

func (h *handler) current(ctx table.Context, c *schemas.DraftCommand, anon, user *schemas.Draft, rec *schemas.DraftRecord) {
	if c.User == "" {
		anon, user = user, nil // keyed by the anonymous owner: its draft is cur
	}
	own := user
	if c.User == "" {
		own = anon
	}
	d := Resolve(anon, user, c.Category, ctx.Key(), c.NewID, ctx.Timestamp())
	if own == nil || d.ID != own.ID || d.Version != own.Version {
		h.write(ctx, &schemas.DraftRecord{Draft: *d}, schemas.OutcomeOK, "")
	}
	h.reply(ctx, c, schemas.OutcomeOK, "", d)
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
	case schemas.DraftPublish:
		if c.User == "" || c.Anon != "" {
			return fmt.Errorf("publish: a logged-in owner (user) alone")
		}
		if c.ExpectedID == "" {
			return fmt.Errorf("publish: expected_id (the draft) is required")
		}
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

func (h *handler) reply(ctx table.Context, c *schemas.DraftCommand, outcome schemas.Outcome, reason string, d *schemas.Draft) {
	ctx.Emit(results, ctx.Key(), &schemas.DraftResult{Owner: ctx.Key(), SourcePartition: ctx.Partition(), SourceOffset: ctx.Offset(),
		Outcome: outcome, Reason: reason, Draft: d})
	h.m.Outcomes.With(string(c.Kind), string(outcome)).Inc()
}

func (h *handler) reject(ctx table.Context, data []byte, c *schemas.DraftCommand, reason string) {
	ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(Group, ctx.Topic(),
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
	Streams table.Config
	// Partitions of drafts.commands: a command on another partition than
	// its owner's is refused. 0: Run asks the broker.
	Partitions int32
	Metrics    *Metrics
	OnReady    func()
}

func (c *Config) graph() *table.Graph {
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
	return Graph(c.Metrics, c.Partitions)
}

// Run runs the drafts group until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Partitions == 0 {
		n, err := streams.PartitionsOf(ctx, cfg.Streams.Cluster.Admin(), topics.DraftsCommands)
		if err != nil {
			return fmt.Errorf("drafts: %w", err)
		}
		cfg.Partitions = n
	}
	return cfg.graph().Run(ctx, cfg.Streams, cfg.OnReady)
}

// Replay rebuilds the drafts table from drafts.commands. The group must not
// be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	cfg.Partitions = partitions
	return cfg.graph().Replay(ctx, cfg.Streams, topics.Find(string(Table), partitions).Configs(), partitions, replication)
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
