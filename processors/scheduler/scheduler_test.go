package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func record(stages ...schemas.StageState) *schemas.OfferRecord {
	p := int64(10)
	return &schemas.OfferRecord{Offer: schemas.Offer{ID: offers.IDFrom(1), SellerID: "s", Category: "cars", Title: "t", Price: &p,
		Currency: "RUB", Status: schemas.OfferActive, CreatedAt: t0, ExposedSince: t0.UnixMilli()}, Version: 3, Stages: stages}
}

func cmd(c *schemas.OfferCommand, off int64) offers.Input {
	c.OfferID, c.ExpectedVersion = offers.IDFrom(1), -1
	return offers.Input{Topic: topics.OffersCommands, Offset: off, At: t0.Add(time.Duration(off) * time.Second), Key: c.OfferID, Command: c}
}

func TestAggregateQueuesOnce(t *testing.T) {
	r := record()
	d := offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "a"}, 1))
	if d.Outcome != schemas.OutcomeOK || d.Queue == nil || d.Queue.Version != 3 || !d.StateOnly || d.Record.Version != 3 {
		t.Fatalf("enqueue: %+v", d)
	}
	if st, _ := offers.StageOf(d.Record, "a"); !st.Queued {
		t.Fatal("not marked queued")
	}
	if d2 := offers.Decide(d.Record, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "a"}, 2)); d2.Outcome != schemas.OutcomeIgnored || d2.Queue != nil {
		t.Errorf("a second enqueue: %+v", d2)
	}
	if d2 := offers.Decide(d.Record, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "b", Low: true}, 3)); d2.Queue == nil || !d2.Queue.Low {
		t.Errorf("another stage's low-priority enqueue: %+v", d2)
	}
	del := record()
	del.Offer.Status = schemas.OfferDeleted
	if d := offers.Decide(del, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "a"}, 4)); d.Outcome != schemas.OutcomeNotFound {
		t.Errorf("enqueue of a deleted offer: %+v", d)
	}
	if d := offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "Bad/Stage"}, 5)); d.Outcome != schemas.OutcomeInvalid {
		t.Errorf("bad stage name: %+v", d)
	}
}

func TestAggregateResults(t *testing.T) {
	queued := record(schemas.StageState{Stage: "a", Queued: true, Version: 4, TimerAt: 99})
	// A result for the version read: saved with the state, the timer and an effect.
	upd := queued.Offer
	upd.Title = "new title"
	d := offers.Decide(queued, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: 3, Offer: &upd,
		State: &schemas.StageState{TypeURL: "t/x", Value: []byte("v")}, TimerAt: 500}, 1))
	st, _ := offers.StageOf(d.Record, "a")
	if d.Outcome != schemas.OutcomeOK || d.Record.Version != 4 || d.Record.Offer.Title != "new title" || d.StateOnly ||
		st.Queued || st.Version != 5 || string(st.Value) != "v" || st.TimerAt != 500 || d.Timer == nil || d.Timer.DueAt != 500 ||
		d.Effect == nil || !d.Effect.Changed || d.Effect.Version != 4 || d.Change != "STAGE a" {
		t.Fatalf("result: %+v state %+v", d, st)
	}
	// The offer moved since the stage read it: discarded, queued again on the new version.
	d = offers.Decide(queued, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: 2, Offer: &upd}, 2))
	if d.Outcome != schemas.OutcomeConflict || !onlyRemembered(d, 2) || d.Queue == nil || d.Queue.Version != 3 {
		t.Fatalf("stale result: %+v", d)
	}
	// A state-only result leaves the offer's version; -1 clears the timer.
	d = offers.Decide(queued, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: 3, TimerAt: -1}, 3))
	st, _ = offers.StageOf(d.Record, "a")
	if d.Outcome != schemas.OutcomeOK || !d.StateOnly || d.Record.Version != 3 || st.TimerAt != 0 || d.Timer == nil || d.Timer.DueAt != 0 || d.Effect.Changed {
		t.Fatalf("state-only result: %+v %+v", d, st)
	}
	// A result for an offer no longer queued (a repeated item) changes nothing.
	if d := offers.Decide(record(), cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: 3}, 4)); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("result of an unqueued offer: %+v", d)
	}
}

func TestAggregateTimersAndCAS(t *testing.T) {
	r := record()
	d := offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandSetTimer, Stage: "a", TimerAt: 1000}, 1))
	if d.Outcome != schemas.OutcomeOK || d.Timer == nil || d.Timer.DueAt != 1000 {
		t.Fatalf("set timer: %+v", d)
	}
	r = d.Record
	if d := offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandSetTimer, Stage: "a", TimerAt: 1000}, 2)); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("the same timer again: %+v", d)
	}
	fire := cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "a", FiredAt: 1000}, 3)
	d = offers.Decide(r, fire)
	st, _ := offers.StageOf(d.Record, "a")
	if d.Outcome != schemas.OutcomeOK || d.Queue == nil || st.TimerAt != 0 || !st.Queued || d.Timer == nil || d.Timer.DueAt != 0 {
		t.Fatalf("firing: %+v %+v", d, st)
	}
	if d := offers.Decide(d.Record, fire); d.Outcome != schemas.OutcomeIgnored || d.Queue != nil {
		t.Errorf("the same timer fired twice: %+v", d)
	}
	// Compare-and-set of the state.
	cas := func(version int64) offers.Decision {
		return offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandStateCAS, Stage: "a",
			State: &schemas.StageState{Value: []byte("x"), Version: version}}, 4))
	}
	if d := cas(0); d.Outcome != schemas.OutcomeOK || d.Version != 1 {
		t.Errorf("CAS at the current version: %+v", d)
	}
	if d := cas(7); d.Outcome != schemas.OutcomeConflict || d.Version != 0 || !onlyRemembered(d, 4) {
		t.Errorf("CAS at a stale version: %+v", d)
	}
}

// onlyRemembered reports whether d writes nothing but its answer to the
// command at offset off (remembered in the record, for a redelivery).
func onlyRemembered(d offers.Decision, off int64) bool {
	if d.Record == nil {
		return false
	}
	rr, ok := offers.Recall(d.Record, 0, off)
	return d.StateOnly && ok && rr.Outcome == string(d.Outcome)
}

func TestRoute(t *testing.T) {
	ev := &schemas.OfferEvent{Offer: record().Offer, Version: 3, Changed: []string{"title"}}
	yes := func() (Should, error) { return Should{Process: true}, nil }
	kinds := func(cs []*schemas.OfferCommand) []schemas.CommandKind {
		var out []schemas.CommandKind
		for _, c := range cs {
			out = append(out, c.Kind)
		}
		return out
	}
	if got := kinds(Route(StageConfig{Name: "a"}, ev, yes)); !slices.Equal(got, []schemas.CommandKind{schemas.CommandEnqueue}) {
		t.Errorf("process: %v", got)
	}
	if got := Route(StageConfig{Name: "a", Fields: []string{"price"}}, ev, yes); got != nil {
		t.Errorf("a change of no interest asked the stage: %v", got)
	}
	failing := func() (Should, error) { return Should{}, errors.New("down") }
	if got := kinds(Route(StageConfig{Name: "a"}, ev, failing)); !slices.Equal(got, []schemas.CommandKind{schemas.CommandEnqueue}) {
		t.Errorf("a failed ShouldProcess must queue: %v", got)
	}
	timer := func() (Should, error) { return Should{TimerAt: 77}, nil }
	if got := Route(StageConfig{Name: "a"}, ev, timer); len(got) != 1 || got[0].Kind != schemas.CommandSetTimer || got[0].TimerAt != 77 {
		t.Errorf("timer: %+v", got)
	}
	ev.Stages = []schemas.StageState{{Stage: "a", TimerAt: 77}}
	if got := Route(StageConfig{Name: "a"}, ev, timer); got != nil {
		t.Errorf("the same timer again: %+v", got)
	}
	ev.Stages = []schemas.StageState{{Stage: "a", Queued: true}}
	if got := Route(StageConfig{Name: "a"}, ev, yes); got != nil {
		t.Errorf("an offer in the queue asked again: %v", got)
	}
	ev.Stages, ev.Offer.Status = nil, schemas.OfferDeleted
	if got := Route(StageConfig{Name: "a"}, ev, yes); got != nil {
		t.Errorf("a deleted offer: %v", got)
	}
}

func TestExpiry(t *testing.T) {
	e := Expiry{Days: 180}
	o := record().Offer
	due := t0.Add(180 * 24 * time.Hour)
	if s := e.should(&o, schemas.StageState{}, t0.Add(time.Hour)); s.Process || s.TimerAt != due.UnixMilli() {
		t.Errorf("a fresh offer: %+v", s)
	}
	if s := e.should(&o, schemas.StageState{TimerAt: due.UnixMilli()}, t0); s.Process || s.TimerAt != 0 {
		t.Errorf("timer already set: %+v", s)
	}
	if s := e.should(&o, schemas.StageState{}, due); !s.Process {
		t.Errorf("a due offer: %+v", s)
	}
	if r := e.process(&o, due.Add(-time.Second)); r.Offer != nil {
		t.Errorf("expired early: %+v", r)
	}
	if r := e.process(&o, due); r.Offer == nil || r.Offer.Status != schemas.OfferExpired || r.TimerAt != -1 {
		t.Errorf("expire: %+v", r)
	}
	o.Status = schemas.OfferSold
	if s := e.should(&o, schemas.StageState{}, due); s.Process || s.TimerAt != 0 {
		t.Errorf("a sold offer: %+v", s)
	}
}

// TestExpiryCountsExposure: an offer created 200 days ago, exposed 10 days,
// then reactivated, has 170 days left, not none; a banned one has no due
// time; a legacy record counts from its creation.
func TestExpiryCountsExposure(t *testing.T) {
	const day = 24 * time.Hour
	e := Expiry{Days: 180}
	now := t0.Add(200 * day)
	o := record().Offer
	o.ExposedMs, o.ExposedSince = (10 * day).Milliseconds(), now.UnixMilli()
	due := now.Add(170 * day)
	if s := e.should(&o, schemas.StageState{}, now.Add(time.Hour)); s.Process || s.TimerAt != due.UnixMilli() {
		t.Errorf("reactivated after 10 days of exposure: %+v, want a timer at %d", s, due.UnixMilli())
	}
	if r := e.process(&o, now.Add(time.Hour)); r.Offer != nil {
		t.Errorf("expired with 170 days left: %+v", r.Offer)
	}
	if r := e.process(&o, due); r.Offer == nil || r.Offer.Status != schemas.OfferExpired {
		t.Errorf("not expired at 180 days of exposure: %+v", r)
	}
	// The same due time on a clock behind the log's.
	if s := e.should(&o, schemas.StageState{}, now.Add(-time.Hour)); s.TimerAt != due.UnixMilli() {
		t.Errorf("a clock behind: %+v", s)
	}
	banned := o
	banned.ExposedSince = 0
	if s := e.should(&banned, schemas.StageState{}, due); s.Process || s.TimerAt != 0 {
		t.Errorf("an offer not exposed: %+v", s)
	}
	legacy := record().Offer
	legacy.ExposedSince = schemas.ExposureUnknown
	if s := e.should(&legacy, schemas.StageState{}, t0); s.TimerAt != t0.Add(180*day).UnixMilli() {
		t.Errorf("a legacy offer: %+v", s)
	}
}

func TestLimiterPaces(t *testing.T) {
	l := newLimiter(50)
	start := time.Now()
	for range 11 {
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("11 calls at 50/s took %s, under the 200 ms the rate allows", d)
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stages.yaml")
	yaml := "stages:\n  - name: expiry\n    builtin: expiry\n    days: 30\n  - name: price\n    address: price:9000\n" +
		"    rate_limit: 50\n    max_parallelism: 8\n    fields: [title, price]\n    max_failures: 3\n    timeout: 2s\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Stages[1]
	if c.Stages[0].Days != 30 || p.Address != "price:9000" || p.RateLimit != 50 || p.MaxParallelism != 8 ||
		!slices.Equal(p.Fields, []string{"title", "price"}) || p.MaxFailures != 3 || p.Timeout != 2*time.Second {
		t.Errorf("%+v", c)
	}
	if err := os.WriteFile(path, []byte("stages:\n  - name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil {
		t.Error("a stage without builtin or address loaded")
	}
	// A misspelt key is an error naming its line, in the file's words.
	if err := os.WriteFile(path, []byte("stages:\n  - name: price\n    address: price:9000\n    rate_limt: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), "line 4: field rate_limt not found") || strings.Contains(err.Error(), "StageConfig") {
		t.Errorf("a misspelt key: %v", err)
	}
	// An empty file is no stages, not an error.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err != nil {
		t.Errorf("an empty stages file: %v", err)
	}
}

func TestConfig(t *testing.T) {
	c := Config{Stages: []StageConfig{{Name: "a", Builtin: "expiry"}, {Name: "b", Address: "x:1", Fields: []string{"price"}}}}
	if err := c.Validate(); err != nil || c.Stages[0].MaxParallelism != 4 || c.Stages[0].MaxFailures != 5 {
		t.Fatalf("%v %+v", err, c)
	}
	for _, bad := range []Config{
		{Stages: []StageConfig{{Name: "a"}}},
		{Stages: []StageConfig{{Name: "a", Builtin: "expiry", Address: "x"}}},
		{Stages: []StageConfig{{Name: "a", Builtin: "nope"}}},
		{Stages: []StageConfig{{Name: "a", Builtin: "expiry"}, {Name: "a", Builtin: "expiry"}}},
		{Stages: []StageConfig{{Name: "a", Builtin: "expiry", Fields: []string{"colour"}}}},
		{Stages: []StageConfig{{Name: "A_b", Builtin: "expiry"}}},
		{Stages: []StageConfig{{Name: offers.ArchiveStage, Builtin: "expiry"}}},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestChainReactionsAreBounded: the aggregate counts stage results in a row
// and names the stage; a stage is not asked about its own change, and a
// change made by MaxChain results in a row goes to no stage, so two stages
// that keep changing an offer for each other stop (gost-scheduler.md,
// "Проблемы").
// TestABatchAsksAboutEveryChange: the changes of one offer in a router's
// batch ask a stage about each field any of them changed (a CREATE then a
// price update: a stage of [status] is asked), not the last change's
// alone, and never about the stage's own result or a change past the
// chain bound.
func TestABatchAsksAboutEveryChange(t *testing.T) {
	o := record().Offer
	created := schemas.OfferEvent{Offer: o, Version: 1, Changed: offers.Fields}
	price := schemas.OfferEvent{Offer: o, Version: 2, Changed: []string{"price"}}
	byA := schemas.OfferEvent{Offer: o, Version: 3, Changed: []string{"photos"}, ByStage: "a", StageDepth: 1}
	yes := func() (Should, error) { return Should{Process: true}, nil }
	status := StageConfig{Name: "s", Fields: []string{"status"}}

	ev, ok := Merge([]schemas.OfferEvent{created, price}, status.Name)
	if !ok || ev.Version != 2 || len(Route(status, &ev, yes)) != 1 {
		t.Errorf("a creation followed by an update in one batch: %v %+v", ok, ev)
	}
	if ev, ok := Merge([]schemas.OfferEvent{price}, status.Name); ok && len(Route(status, &ev, yes)) != 0 {
		t.Errorf("a price change asked a stage of [status]")
	}
	// a's own result is not a's change; b sees it, as an outside one.
	photos := StageConfig{Name: "a", Fields: []string{"photos"}}
	if ev, ok := Merge([]schemas.OfferEvent{price, byA}, "a"); !ok || slices.Contains(ev.Changed, "photos") || len(Route(photos, &ev, yes)) != 0 {
		t.Errorf("a asked about its own result: %+v", ev)
	}
	if ev, ok := Merge([]schemas.OfferEvent{price, byA}, "b"); !ok || !slices.Equal(ev.Changed, []string{"price", "photos"}) || ev.StageDepth != 0 || ev.Version != 3 {
		t.Errorf("b's change: %+v", ev)
	}
	if _, ok := Merge([]schemas.OfferEvent{byA}, "a"); ok {
		t.Error("a batch of a's own result alone routed to a")
	}
	cut := byA
	cut.StageDepth = MaxChain
	if _, ok := Merge([]schemas.OfferEvent{cut}, "b"); ok {
		t.Error("a change past the chain bound routed")
	}
}

func TestChainReactionsAreBounded(t *testing.T) {
	r := record(schemas.StageState{Stage: "a"}, schemas.StageState{Stage: "b"})
	off := int64(1)
	result := func(stage string) {
		t.Helper()
		d := offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: stage}, off))
		r = d.Record
		o := r.Offer
		o.Title = fmt.Sprint("by ", stage, " at ", off)
		d = offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: stage, ReadVersion: r.Version, Offer: &o}, off+1))
		if d.Outcome != schemas.OutcomeOK {
			t.Fatalf("result of %s: %+v", stage, d)
		}
		r, off = d.Record, off+2
	}
	event := func() *schemas.OfferEvent {
		return &schemas.OfferEvent{Offer: r.Offer, Version: r.Version, Changed: []string{"title"}, ByStage: r.ByStage, StageDepth: r.StageDepth}
	}
	yes := func() (Should, error) { return Should{Process: true}, nil }
	a, b := StageConfig{Name: "a"}, StageConfig{Name: "b"}
	result("a")
	if r.ByStage != "a" || r.StageDepth != 1 {
		t.Fatalf("after a's result: by %q depth %d", r.ByStage, r.StageDepth)
	}
	if got := Route(a, event(), yes); got != nil {
		t.Errorf("a asked about its own change: %v", got)
	}
	if got := Route(b, event(), yes); len(got) != 1 {
		t.Errorf("b not asked about a's change: %v", got)
	}
	for i := 2; i <= MaxChain; i++ {
		result(map[bool]string{true: "b", false: "a"}[i%2 == 0])
	}
	if r.StageDepth != MaxChain || !Cut(event()) {
		t.Fatalf("depth %d after %d results in a row, cut %v", r.StageDepth, MaxChain, Cut(event()))
	}
	if got := Route(a, event(), yes); got != nil {
		t.Errorf("a change past the chain bound routed: %v", got)
	}
	// An outside change starts over.
	o := r.Offer
	o.Title = "the seller's"
	d := offers.Decide(r, cmd(&schemas.OfferCommand{Kind: schemas.CommandUpdate, SellerID: r.Offer.SellerID, Offer: &o}, off))
	if d.Record.ByStage != "" || d.Record.StageDepth != 0 {
		t.Errorf("an outside change kept the chain: by %q depth %d", d.Record.ByStage, d.Record.StageDepth)
	}
}

// TestPatchesConflictOnlyOnTheirFields: a stage's patch of an offer that
// moved since it read it applies to the current version unless a field it
// patches changed meanwhile; a whole result of an older version is always
// discarded (gost-scheduler.md: patches, fewer conflicts).
func TestPatchesConflictOnlyOnTheirFields(t *testing.T) {
	id := offers.IDFrom(1)
	create := offers.Decide(nil, cmd(&schemas.OfferCommand{Kind: schemas.CommandCreate, SellerID: "s", DraftOwner: "user:s", DraftID: id,
		Offer: &schemas.Offer{Category: "cars", Title: "t", Price: new(int64(10)), Currency: "RUB"}}, 1)).Record
	if v := offers.FieldVersion(create, "title"); v != 1 || len(create.FieldVersions) != len(offers.Fields) {
		t.Fatalf("a new offer's field versions %+v", create.FieldVersions)
	}
	queued := offers.Decide(create, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "a"}, 2)).Record
	read := *queued // what the stage read: version 1
	// The seller changes the title meanwhile: version 2.
	upd := queued.Offer
	upd.Title = "the seller's title"
	moved := offers.Decide(queued, cmd(&schemas.OfferCommand{Kind: schemas.CommandUpdate, SellerID: "s", Offer: &upd}, 3)).Record
	if moved.Version != 2 || offers.FieldVersion(moved, "title") != 2 || offers.FieldVersion(moved, "price") != 1 {
		t.Fatalf("after the seller's update: version %d, field versions %+v", moved.Version, moved.FieldVersions)
	}
	result := read.Offer
	result.Price = new(int64(99))
	patch := &schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: read.Version, Offer: &result,
		Patch: true, PatchFields: PatchOf(&read, &result)}
	if !slices.Equal(patch.PatchFields, []string{"price"}) {
		t.Fatalf("the patch's fields %v, want price", patch.PatchFields)
	}
	d := offers.Decide(moved, cmd(patch, 4))
	if d.Outcome != schemas.OutcomeOK || d.Record.Version != 3 || *d.Record.Offer.Price != 99 || d.Record.Offer.Title != "the seller's title" {
		t.Fatalf("a patch of a field nobody changed: %+v %+v", d, d.Record.Offer)
	}
	// A patch of the title the seller changed conflicts, and is queued again.
	result = read.Offer
	result.Title = "the stage's title"
	d = offers.Decide(moved, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: read.Version, Offer: &result,
		Patch: true, PatchFields: PatchOf(&read, &result)}, 5))
	if d.Outcome != schemas.OutcomeConflict || d.Queue == nil {
		t.Errorf("a patch of a changed field: %+v", d)
	}
	// A whole result of the older version conflicts, whatever it changed.
	result = read.Offer
	result.Price = new(int64(99))
	d = offers.Decide(moved, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: read.Version, Offer: &result}, 6))
	if d.Outcome != schemas.OutcomeConflict {
		t.Errorf("a whole result of an older version: %+v", d)
	}
	// Moderation is not a stage's to patch.
	d = offers.Decide(moved, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: moved.Version, Offer: &result,
		Patch: true, PatchFields: []string{"moderation"}}, 7))
	if d.Outcome != schemas.OutcomeInvalid || d.Field != "patch_fields" {
		t.Errorf("a patch of moderation: %+v", d)
	}
}

// TestAPatchStageSeesAnOutsideChangeMadeWhileItWorked is issue 52's
// defect 4: stage a (patches) works from version 1; the seller changes
// the title meanwhile (version 2); a's patch of the price applies to
// version 2 without a having seen the title. The router, which skipped a
// queued stage, now asks it, and the aggregate marks it Again, so the
// saved result queues a once more, on the version it wrote; a whole-result
// stage is still skipped while queued (its result conflicts instead).
func TestAPatchStageSeesAnOutsideChangeMadeWhileItWorked(t *testing.T) {
	id := offers.IDFrom(1)
	create := offers.Decide(nil, cmd(&schemas.OfferCommand{Kind: schemas.CommandCreate, SellerID: "s", DraftOwner: "user:s", DraftID: id,
		Offer: &schemas.Offer{Category: "cars", Title: "t", Price: new(int64(10)), Currency: "RUB"}}, 1)).Record
	queued := offers.Decide(create, cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, Stage: "a"}, 2)).Record
	read := *queued
	upd := queued.Offer
	upd.Title = "the seller's title"
	moved := offers.Decide(queued, cmd(&schemas.OfferCommand{Kind: schemas.CommandUpdate, SellerID: "s", Offer: &upd}, 3)).Record

	// The router sees the seller's change while a is queued.
	ev := &schemas.OfferEvent{Offer: moved.Offer, Version: moved.Version, Changed: []string{"title"}, Stages: moved.Stages}
	yes := func() (Should, error) { return Should{Process: true}, nil }
	if got := Route(StageConfig{Name: "a"}, ev, yes); got != nil {
		t.Fatalf("a whole-result stage in the queue asked again: %+v", got)
	}
	got := Route(StageConfig{Name: "a", Patches: true}, ev, yes)
	if len(got) != 1 || got[0].Kind != schemas.CommandEnqueue || !got[0].Patch {
		t.Fatalf("a patch stage in the queue, asked about an outside change: %+v, want an ENQUEUE with Patch", got)
	}
	got[0].OfferID, got[0].SellerID = id, "s"
	d := offers.Decide(moved, cmd(got[0], 4))
	marked := d.Record
	if st, _ := offers.StageOf(marked, "a"); d.Outcome != schemas.OutcomeOK || !st.Queued || !st.Again || d.Queue != nil || marked.Version != moved.Version {
		t.Fatalf("the ENQUEUE of a queued patch stage: %+v, state %+v; want it marked Again, no second item, the offer's version kept", d, st)
	}
	// Asked again before its result: nothing more.
	ev.Stages = marked.Stages
	if got := Route(StageConfig{Name: "a", Patches: true}, ev, yes); got != nil {
		t.Errorf("a stage marked Again asked again: %+v", got)
	}

	// a's patch of the price applies to version 2, and queues a again on
	// the version it wrote.
	result := read.Offer
	result.Price = new(int64(99))
	d = offers.Decide(marked, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: read.Version, Offer: &result,
		Patch: true, PatchFields: PatchOf(&read, &result)}, 5))
	st, _ := offers.StageOf(d.Record, "a")
	if d.Outcome != schemas.OutcomeOK || *d.Record.Offer.Price != 99 || !st.Queued || st.Again || d.Queue == nil ||
		d.Queue.Version != d.Record.Version || d.Queue.StateVersion != st.Version {
		t.Fatalf("the patch of a stage marked Again: %+v, state %+v, queue %+v; want it saved and a queued once more at version %d",
			d, st, d.Queue, d.Record.Version)
	}
	// Its next result, with nothing new, leaves the queue.
	again := d.Record
	d = offers.Decide(again, cmd(&schemas.OfferCommand{Kind: schemas.CommandResult, Stage: "a", ReadVersion: again.Version}, 6))
	if st, _ := offers.StageOf(d.Record, "a"); d.Outcome != schemas.OutcomeOK || st.Queued || st.Again || d.Queue != nil {
		t.Errorf("the second result: %+v, state %+v; want a out of the queue", d, st)
	}
}
