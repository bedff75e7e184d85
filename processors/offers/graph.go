package offers

import (
	"fmt"
	"slices"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group is the offer aggregate's group; its table is Table.
const Group = "offers"

// Table is the aggregate's group table (topic offers-table).
var Table = table.GroupTable(Group)

// TableCodec is the codec of the table's values (*schemas.OfferRecord).
var TableCodec streams.Codec = streams.Table[schemas.OfferRecord]{C: schemas.OfferRecords}

const (
	commands   = topics.OffersCommands
	events     = topics.OffersEvents
	results    = topics.OffersResults
	dead       = topics.OffersDead
	requests   = topics.PhotosRequests
	changes    = topics.CabinetChanges
	presets    = topics.CabinetPresets
	feedsIndex = topics.FeedsIndex
	feedsTasks = topics.FeedsTasks
	archives   = topics.OffersArchive
	timers     = topics.SchedulerTimers
	effects    = topics.SchedulerEffects
)

// Metrics of the aggregate.
type Metrics struct {
	Outcomes    *metrics.CounterVec // by input and outcome
	DeadLetters *metrics.Counter
	Recalled    *metrics.Counter
	// TimerRepeats counts timers fired again (after a timer service
	// restart) and ignored.
	TimerRepeats *metrics.Counter
	// Queued is the write path's "command" hop: a client's command's time
	// from its record timestamp (its producer's clock) to the aggregate's
	// decision. The scheduler's stage commands are not observed.
	Queued *metrics.Histogram
}

// NewMetrics registers the aggregate's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Outcomes:    r.Counter("offerlog_offers_outcomes_total", "Commands of the offer aggregate by kind and outcome.", "kind", "outcome"),
		DeadLetters: r.Counter("offerlog_offers_dead_letters_total", "Inputs sent to offers.dead.").With(),
		Recalled:    r.Counter("offerlog_offers_recalled_total", "Commands seen again after a crash and answered as the first time.").With(),
		TimerRepeats: r.Counter("offerlog_scheduler_timer_repeats_total",
			"Timer firings the aggregate ignored because the timer had fired already (a timer service restarted).").With(),
		Queued: r.WriteHops().With("offer", "command"),
	}
}

// Graph returns the aggregate's group graph of c, with the queues of its
// stages (c.Streams is not used: a table.Tester runs it without a broker).
func Graph(c Config) *table.Graph { return c.graph() }

func newGraph(h *handler, framing schemas.Framing) *table.Graph {
	g := &table.Graph{
		Group: Group, Codec: TableCodec, DeadTopic: dead,
		Inputs: []table.Input{{Topic: commands, Callback: h.command}},
		Outputs: []table.Output{
			{Topic: commands, Codec: streams.Bytes{}}, // a publish moving along its draft's chain of ids
			{Topic: events, Codec: streams.Avro[schemas.OfferEvent]{C: schemas.OfferEvents, Framing: framing}},
			{Topic: results, Codec: streams.Avro[schemas.OfferResult]{C: schemas.OfferResults}},
			{Topic: dead, Codec: streams.Avro[schemas.DeadLetter]{C: schemas.DeadLetters}},
			{Topic: requests, Codec: streams.Avro[schemas.PhotoRequest]{C: schemas.PhotoRequests}},
			{Topic: changes, Codec: streams.Avro[schemas.CabinetChange]{C: schemas.CabinetChanges}},
			{Topic: string(presets), Codec: streams.Avro[schemas.PresetEntry]{C: schemas.PresetEntries}},
			{Topic: string(feedsIndex), Codec: streams.Avro[schemas.FeedEntry]{C: schemas.FeedEntries}},
			{Topic: string(feedsTasks), Codec: streams.Avro[schemas.FeedEntry]{C: schemas.FeedEntries}},
			{Topic: timers, Codec: streams.Avro[schemas.StageTimer]{C: schemas.StageTimers}},
			{Topic: effects, Codec: streams.Avro[schemas.StageEffect]{C: schemas.StageEffects}},
			{Topic: string(archives), Codec: streams.Avro[schemas.OfferRecord]{C: schemas.OfferRecords}},
		},
	}
	for _, s := range h.stages {
		for _, low := range []bool{false, true} {
			g.Outputs = append(g.Outputs, table.Output{Topic: topics.QueueTopic(s, low), Codec: streams.Avro[schemas.QueueItem]{C: schemas.QueueItems}})
		}
	}
	return g
}

type handler struct {
	m          *Metrics
	stages     []string
	partitions int32
	// onAnswer, if set, is told each answer once offers.results has it
	// (Config.OnAnswer).
	onAnswer func(schemas.OfferResult)
	// archiveAfter is Input.ArchiveAfter (Config.ArchiveAfter).
	archiveAfter time.Duration
	// exclusive is Input.Exclusive (Config.Exclusive).
	exclusive []string
}

func current(ctx table.Context) *schemas.OfferRecord {
	return table.TableValue[schemas.OfferRecord](ctx, dead)
}

func input(ctx table.Context) Input {
	return Input{Topic: ctx.Topic(), Partition: ctx.Partition(), Offset: ctx.Offset(), At: ctx.Timestamp(), Key: ctx.Key()}
}

func (h *handler) command(ctx table.Context, data []byte) {
	if reason := streams.Misplaced(ctx.Key(), ctx.Partition(), h.partitions); reason != "" {
		h.reject(ctx, data, "", Decision{Outcome: schemas.OutcomeInvalid, Reason: reason})
		return
	}
	var c schemas.OfferCommand
	if err := schemas.OfferCommands.Decode(data, &c); err != nil {
		h.reject(ctx, data, "", Decision{Outcome: schemas.OutcomeInvalid, Reason: fmt.Sprintf("undecodable command: %v", err)})
		return
	}
	if c.Stage == "" {
		// A client's write (the API's, a feed's), not a stage's command.
		h.m.Queued.Observe(time.Since(ctx.Timestamp()).Seconds())
	}
	if c.Stage != "" && !slices.Contains(h.stages, c.Stage) && (c.Stage != ArchiveStage || c.Kind != schemas.CommandEnqueue) {
		h.reject(ctx, data, c.Kind, Decision{Outcome: schemas.OutcomeInvalid, Field: "stage",
			Reason: fmt.Sprintf("no stage %q is configured (have %v)", c.Stage, h.stages)})
		return
	}
	cur := current(ctx)
	if rr, ok := Recall(cur, ctx.Partition(), ctx.Offset()); ok {
		// Decided before a crash, after the input's last commit: answer as
		// the first time, and emit the outputs again if the record is still
		// this command's (they may not have been written).
		h.m.Recalled.Inc()
		table.Reassert(ctx, cur)
		if cur.SourcePartition == ctx.Partition() && cur.SourceOffset == ctx.Offset() {
			h.emit(ctx, cur, nil, "", true)
		}
		if c.Stage != "" {
			h.repeatStage(ctx, cur, c.Stage)
			// An exclusive stage's result may have queued a waiting one
			// (release): its queue item may not be written either.
			if c.Kind == schemas.CommandResult && slices.Contains(h.exclusive, c.Stage) {
				for _, other := range h.exclusive {
					if st, _ := StageOf(cur, other); other != c.Stage && st.Queued {
						h.repeatStage(ctx, cur, other)
					}
				}
			}
		}
		if c.Stage == ArchiveStage && cur.Archived {
			// The archive timer's firing: its ARCHIVE may not be written.
			if f, err := archiveCommand(cur); err == nil {
				h.apply(ctx, nil, Decision{Forward: f, Archive: cur, ArchiveTimer: &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: ArchiveStage}})
			}
		}
		h.result(ctx, c.Kind, Decision{Outcome: schemas.Outcome(rr.Outcome), Reason: rr.Reason, Field: rr.Field, Version: rr.Version})
		return
	}
	in := input(ctx)
	in.Command, in.ArchiveAfter, in.Exclusive = &c, h.archiveAfter, h.exclusive
	d := Decide(cur, in)
	if d.Outcome == schemas.OutcomeInvalid {
		h.reject(ctx, data, c.Kind, d)
		return
	}
	if d.Outcome == schemas.OutcomeCollision && c.DraftID != "" && d.Forward == nil {
		d.Reason += fmt.Sprintf("; %d ids of the draft's chain are taken: not published", MaxHops)
		h.reject(ctx, data, c.Kind, d)
		return
	}
	if c.Kind == schemas.CommandEnqueue && c.FiredAt > 0 && d.Outcome == schemas.OutcomeIgnored {
		h.m.TimerRepeats.Inc()
	}
	h.apply(ctx, cur, d)
	h.result(ctx, c.Kind, d)
}

func (h *handler) apply(ctx table.Context, cur *schemas.OfferRecord, d Decision) {
	if d.Record != nil {
		ctx.SetValue(d.Record)
		if !d.StateOnly {
			h.emit(ctx, d.Record, cur, d.Change, false)
		}
	}
	for i := range d.Photos {
		ctx.Emit(requests, ctx.Key(), &d.Photos[i])
	}
	if q := d.Queue; q != nil {
		ctx.Emit(topics.QueueTopic(q.Stage, q.Low), q.OfferID, q)
	}
	if t := d.Timer; t != nil {
		h.emitTimer(ctx, t)
	}
	if t := d.ArchiveTimer; t != nil {
		h.emitTimer(ctx, t)
	}
	if r := d.Archive; r != nil {
		ctx.Emit(string(archives), r.Offer.ID, r)
	}
	if r := d.Remove; r != nil {
		h.remove(ctx, r)
	}
	if e := d.Effect; e != nil {
		pub := *e
		pub.State = Public(e.State)
		ctx.Emit(effects, ctx.Key(), &pub)
	}
	if f := d.Forward; f != nil {
		data, err := schemas.OfferCommands.Encode(f)
		if err != nil { // a copy of a command that decoded encodes: kept with the reason if not
			ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(Group, ctx.Topic(), ctx.Partition(), ctx.Offset(),
				[]byte(ctx.Key()), nil, ctx.Timestamp(), fmt.Sprintf("the forwarded CREATE to %s does not encode: %v", f.OfferID, err)))
			return
		}
		ctx.Emit(commands, f.OfferID, data)
	}
}

// remove removes r, an archived record, from the table, its stages'
// pending timers from scheduler.timers (no firing of them would be
// accepted, so none would ever remove them), and its external id from the
// feeds' indexes (a deleted offer's are gone already): an archived offer
// is not one of its seller's offers a feed matches, and a feed item of its
// external id makes a new offer. The cabinet's counters and presets are
// not touched: they count what they counted.
func (h *handler) remove(ctx table.Context, r *schemas.OfferRecord) {
	ctx.Delete()
	for _, st := range r.Stages {
		if st.TimerAt != 0 {
			h.emitTimer(ctx, &schemas.StageTimer{OfferID: r.Offer.ID, Stage: st.Stage})
		}
	}
	if o := &r.Offer; o.ExternalID != "" && o.Status != schemas.OfferDeleted {
		ctx.Emit(string(feedsIndex), FeedKey(o.SellerID, o.ExternalID), nil)
		ctx.Emit(string(feedsTasks), FeedTaskKey(o.SellerID, r.FeedTask, o.ExternalID), nil)
	}
}

func (h *handler) emitTimer(ctx table.Context, t *schemas.StageTimer) {
	key := t.OfferID + "/" + t.Stage
	if t.DueAt == 0 {
		ctx.Emit(timers, key, nil)
		return
	}
	ctx.Emit(timers, key, t)
}

// repeatStage emits again what a stage command seen again after a crash
// may not have written: the queue item of a queued offer and the stage's
// timer. Both are harmless when they were written.
func (h *handler) repeatStage(ctx table.Context, cur *schemas.OfferRecord, stage string) {
	st, ok := StageOf(cur, stage)
	if !ok {
		return
	}
	if st.Queued {
		q := &schemas.QueueItem{OfferID: cur.Offer.ID, Stage: stage, Version: cur.Version, StateVersion: st.Version, At: ctx.Timestamp()}
		ctx.Emit(topics.QueueTopic(stage, false), q.OfferID, q)
	}
	h.emitTimer(ctx, &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: stage, DueAt: st.TimerAt})
}

// emit writes the outputs of record r, written over prev. With full, every
// preset membership is written, not only the changed ones: a redelivery
// cannot tell which of its writes were lost.
func (h *handler) emit(ctx table.Context, r, prev *schemas.OfferRecord, change string, full bool) {
	o := &r.Offer
	if change == "" {
		change = "REPEATED"
	}
	ctx.Emit(events, o.ID, &schemas.OfferEvent{Offer: *o, Version: r.Version, Change: change,
		Banned: r.Moderation.Banned, BanReasons: r.Moderation.Reasons, At: o.UpdatedAt, Stages: PublicStages(r.Stages),
		Changed: ChangedFields(prev, r), ByStage: r.ByStage, StageDepth: r.StageDepth})
	ctx.Emit(changes, CabinetKey(o.SellerID, o.ID), &schemas.CabinetChange{SellerID: o.SellerID, OfferID: o.ID,
		SourceTopic: r.SourceTopic, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset,
		Before: r.Previous, After: r.Summary})
	for _, p := range Presets {
		in, was := slices.Contains(r.Summary.Presets, p), slices.Contains(r.Previous.Presets, p)
		if in == was && !full {
			continue
		}
		key := PresetKey(o.SellerID, p, o.CreatedAt, o.ID)
		if in {
			ctx.Emit(string(presets), key, &schemas.PresetEntry{SellerID: o.SellerID, Preset: p, OfferID: o.ID, CreatedAt: o.CreatedAt})
		} else {
			ctx.Emit(string(presets), key, nil)
		}
	}
	if o.ExternalID != "" {
		key, byTask := FeedKey(o.SellerID, o.ExternalID), FeedTaskKey(o.SellerID, r.FeedTask, o.ExternalID)
		held := prev != nil && prev.Offer.Status != schemas.OfferDeleted
		if held && prev.FeedTask != r.FeedTask {
			ctx.Emit(string(feedsTasks), FeedTaskKey(o.SellerID, prev.FeedTask, o.ExternalID), nil)
		}
		if o.Status == schemas.OfferDeleted {
			ctx.Emit(string(feedsIndex), key, nil)
			ctx.Emit(string(feedsTasks), byTask, nil)
		} else if full || !held || prev.FeedTask != r.FeedTask {
			e := &schemas.FeedEntry{SellerID: o.SellerID, ExternalID: o.ExternalID, OfferID: o.ID, TaskID: r.FeedTask}
			ctx.Emit(string(feedsIndex), key, e)
			ctx.Emit(string(feedsTasks), byTask, e)
		}
	}
}

func (h *handler) result(ctx table.Context, kind schemas.CommandKind, d Decision) {
	res := &schemas.OfferResult{OfferID: ctx.Key(), SourcePartition: ctx.Partition(), SourceOffset: ctx.Offset(),
		Outcome: d.Outcome, Reason: d.Reason, Field: d.Field, Version: d.Version}
	ctx.Emit(results, ctx.Key(), res)
	if h.onAnswer != nil {
		// Handed over once the batch is committed, as durable as the copy
		// a matcher reads back from the topic, a hop earlier.
		ctx.AfterCommit(func() { h.onAnswer(*res) })
	}
	if kind == "" {
		kind = "undecodable"
	}
	h.m.Outcomes.With(string(kind), string(d.Outcome)).Inc()
}

// reject keeps an undecodable or invalid input on offers.dead with the
// reason; a command is also answered INVALID.
func (h *handler) reject(ctx table.Context, data []byte, kind schemas.CommandKind, d Decision) {
	reason := d.Reason
	if d.Field != "" {
		reason = d.Field + ": " + d.Reason
	}
	ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(Group, ctx.Topic(),
		ctx.Partition(), ctx.Offset(), []byte(ctx.Key()), data, ctx.Timestamp(), reason))
	h.m.DeadLetters.Inc()
	h.result(ctx, kind, d)
}
