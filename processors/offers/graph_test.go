package offers_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// The aggregate's callbacks on the table runtime's tester: no broker, one
// batch per call.

func encodeCommand(t *testing.T, c *schemas.OfferCommand) []byte {
	t.Helper()
	data, err := schemas.OfferCommands.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// answers returns the answers and the dead letters among outputs.
func answers(t *testing.T, out []*kgo.Record) (results []schemas.OfferResult, dead []schemas.DeadLetter) {
	t.Helper()
	for _, r := range out {
		switch r.Topic {
		case topics.OffersResults:
			var a schemas.OfferResult
			if err := schemas.OfferResults.Decode(r.Value, &a); err != nil {
				t.Fatal(err)
			}
			results = append(results, a)
		case topics.OffersDead:
			var d schemas.DeadLetter
			if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
				t.Fatal(err)
			}
			dead = append(dead, d)
		}
	}
	return results, dead
}

func newOffer(id string) *schemas.Offer {
	price := int64(100)
	return &schemas.Offer{ID: id, SellerID: "s1", Category: "cars", Title: "one", Price: &price, Currency: "RUB"}
}

// TestACommandSeenAgainIsAnsweredFromItsRecord: a create handled, then the
// same record again (a batch redelivered after a crash before its mark):
// the answer is the first one, from the record, which is written again;
// the outputs are emitted again; a later update is decided on version 1.
func TestACommandSeenAgainIsAnsweredFromItsRecord(t *testing.T) {
	m := offers.NewMetrics(metrics.New())
	tt := table.NewTester(offers.Graph(offers.Config{Metrics: m}))
	id := offers.IDFrom(42)
	create := tt.Record(topics.OffersCommands, 0, id, encodeCommand(t, &schemas.OfferCommand{Kind: schemas.CommandCreate,
		OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: newOffer(id)}))
	out, err := tt.ConsumeBatch(create)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := answers(t, out)
	if len(first) != 1 || first[0].Outcome != schemas.OutcomeOK || first[0].Version != 1 {
		t.Fatalf("create answered %+v", first)
	}
	again, err := tt.ConsumeBatch(create)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := answers(t, again)
	if len(second) != 1 || second[0] != first[0] || m.Recalled.Value() != 1 {
		t.Fatalf("the create seen again was answered %+v (first %+v), recalled %d", second, first[0], m.Recalled.Value())
	}
	if !hasTopic(again, topics.OffersEvents) || !hasTopic(again, topics.CabinetChanges) {
		t.Errorf("the create seen again did not emit its outputs again: %v", topicsOf(again))
	}
	rec, _ := tt.Value(id).(*schemas.OfferRecord)
	if rec == nil || rec.Version != 1 {
		t.Fatalf("the table holds %+v after the repeat", tt.Value(id))
	}
	upd := newOffer(id)
	upd.Title = "two"
	out, err = tt.Consume(topics.OffersCommands, 0, id, encodeCommand(t, &schemas.OfferCommand{Kind: schemas.CommandUpdate,
		OfferID: id, SellerID: "s1", ExpectedVersion: 1, Offer: upd}))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := answers(t, out); len(res) != 1 || res[0].Outcome != schemas.OutcomeOK || res[0].Version != 2 {
		t.Fatalf("the update answered %+v", res)
	}
}

// TestBadInputIsAnsweredNotObeyed: an undecodable command, a command on
// another partition than its key's, a stage no one configured, and
// garbage in the table under the command's key.
func TestBadInputIsAnsweredNotObeyed(t *testing.T) {
	m := offers.NewMetrics(metrics.New())
	tt := table.NewTester(offers.Graph(offers.Config{Metrics: m, Stages: []string{"moderation"}, Partitions: 8}))
	id := offers.IDFrom(7)
	home := streams.Partition(id, 8)
	create := encodeCommand(t, &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: newOffer(id)})
	for _, c := range []struct {
		name      string
		partition int32
		value     []byte
		reason    string
	}{
		{"garbage", home, []byte("not avro"), "undecodable command"},
		{"misplaced", (home + 1) % 8, create, "partition"},
		{"unknown stage", home, encodeCommand(t, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, SellerID: "s1",
			Stage: "nosuch", ExpectedVersion: -1}), "no stage"},
	} {
		out, err := tt.Consume(topics.OffersCommands, c.partition, id, c.value)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		res, dead := answers(t, out)
		if len(res) != 1 || res[0].Outcome != schemas.OutcomeInvalid || len(dead) != 1 || !strings.Contains(dead[0].Reason, c.reason) {
			t.Errorf("%s: answered %+v, dead letters %+v; want INVALID and one dead letter saying %q", c.name, res, dead, c.reason)
		}
	}
	if tt.Keys() != 0 {
		t.Fatalf("bad input wrote %d table values", tt.Keys())
	}
	tt.SetValue(id, []byte("garbage in the changelog"))
	out, err := tt.Consume(topics.OffersCommands, home, id, create)
	if err != nil {
		t.Fatal(err)
	}
	res, dead := answers(t, out)
	if len(res) != 1 || res[0].Outcome != schemas.OutcomeOK || len(dead) != 1 || dead[0].Topic != string(topics.OffersTable) {
		t.Fatalf("a create over an undecodable value: answered %+v, dead letters %+v; want OK and the value dead-lettered", res, dead)
	}
	if rec, _ := tt.Value(id).(*schemas.OfferRecord); rec == nil || rec.Version != 1 {
		t.Fatalf("the create did not replace the garbage: %+v", tt.Value(id))
	}
}

func hasTopic(out []*kgo.Record, topic string) bool {
	for _, r := range out {
		if r.Topic == topic {
			return true
		}
	}
	return false
}

func topicsOf(out []*kgo.Record) []string {
	var ts []string
	for _, r := range out {
		ts = append(ts, r.Topic)
	}
	return ts
}

// TestAnOfferDoneWithMovesToTheArchive: a feed's offer sold arms its
// archive timer on scheduler.timers; the timer's firing marks it archived,
// writes it to offers.archive and appends an ARCHIVE (seen again after a
// crash, it writes both again); the ARCHIVE removes it from the table and
// its external id from the feeds' indexes, never touching the cabinet;
// seen again with the record gone, it writes the archive again and is
// answered the same.
func TestAnOfferDoneWithMovesToTheArchive(t *testing.T) {
	m := offers.NewMetrics(metrics.New())
	tt := table.NewTester(offers.Graph(offers.Config{Metrics: m, ArchiveAfter: time.Hour, Stages: []string{"moderation"}}))
	id := offers.IDFrom(11)
	run := func(records ...*kgo.Record) []*kgo.Record {
		t.Helper()
		out, err := tt.ConsumeBatch(records...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	send := func(c *schemas.OfferCommand) []*kgo.Record {
		t.Helper()
		return run(tt.Record(topics.OffersCommands, 0, id, encodeCommand(t, c)))
	}
	send(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExternalID: "x1", TaskID: 1, ExpectedVersion: -1, Offer: newOffer(id)})
	// A stage's pending timer, which the archive must not leave behind.
	send(&schemas.OfferCommand{Kind: schemas.CommandSetTimer, OfferID: id, Stage: "moderation", TimerAt: 4_000_000_000_000, ExpectedVersion: -1, ReadVersion: -1})
	sold := newOffer(id)
	sold.Status = schemas.OfferSold
	out := send(&schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sold})
	rec := tt.Value(id).(*schemas.OfferRecord)
	timer := only(t, out, topics.SchedulerTimers)
	var st schemas.StageTimer
	if err := schemas.StageTimers.Decode(timer.Value, &st); err != nil || string(timer.Key) != id+"/"+offers.ArchiveStage ||
		st.DueAt != rec.ArchiveAt || rec.ArchiveAt == 0 {
		t.Fatalf("the sale's archive timer: %s %+v (%v), record's archive time %d", timer.Key, st, err, rec.ArchiveAt)
	}

	fire := tt.Record(topics.OffersCommands, 0, id, encodeCommand(t, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id,
		Stage: offers.ArchiveStage, FiredAt: st.DueAt, ExpectedVersion: -1, ReadVersion: -1}))
	archived := func(out []*kgo.Record) {
		t.Helper()
		a := only(t, out, string(topics.OffersArchive))
		var got schemas.OfferRecord
		if err := schemas.OfferRecords.Decode(a.Value, &got); err != nil || string(a.Key) != id || !got.Archived ||
			got.Version != rec.Version || got.Offer.Status != schemas.OfferSold {
			t.Fatalf("offers.archive got %s %+v (%v)", a.Key, got, err)
		}
	}
	forwards := func(out []*kgo.Record) *kgo.Record {
		t.Helper()
		archived(out)
		f := only(t, out, topics.OffersCommands)
		if tm := only(t, out, topics.SchedulerTimers); tm.Value != nil {
			t.Fatalf("the fired archive timer is not removed: %v", tm.Value)
		}
		return f
	}
	archive := forwards(run(fire))
	if r := tt.Value(id).(*schemas.OfferRecord); !r.Archived || r.Version != rec.Version {
		t.Fatalf("after the firing the table holds %+v", r)
	}
	if again := forwards(run(fire)); !bytes.Equal(again.Value, archive.Value) {
		t.Fatal("the firing seen again appended another ARCHIVE")
	}
	moveRec := tt.Record(topics.OffersCommands, 0, id, archive.Value)
	check := func(out []*kgo.Record) schemas.OfferResult {
		t.Helper()
		if tt.Value(id) != nil {
			t.Fatalf("after the ARCHIVE the table holds %+v", tt.Value(id))
		}
		if f := only(t, out, string(topics.FeedsIndex)); string(f.Key) != offers.FeedKey("s1", "x1") || f.Value != nil {
			t.Fatalf("feeds.index got %s=%v, want its tombstone", f.Key, f.Value)
		}
		if f := only(t, out, string(topics.FeedsTasks)); string(f.Key) != offers.FeedTaskKey("s1", 1, "x1") || f.Value != nil {
			t.Fatalf("feeds.tasks got %s=%v, want its tombstone", f.Key, f.Value)
		}
		if hasTopic(out, topics.CabinetChanges) || hasTopic(out, string(topics.CabinetPresets)) || hasTopic(out, topics.OffersEvents) {
			t.Fatalf("the archive wrote %v: the cabinet counts what it counted", topicsOf(out))
		}
		if tm := only(t, out, topics.SchedulerTimers); string(tm.Key) != id+"/moderation" || tm.Value != nil {
			t.Fatalf("the stage's pending timer is not removed: %s=%v", tm.Key, tm.Value)
		}
		res, _ := answers(t, out)
		if len(res) != 1 || res[0].Outcome != schemas.OutcomeOK || res[0].Version != rec.Version {
			t.Fatalf("the ARCHIVE was answered %+v", res)
		}
		return res[0]
	}
	moved := run(moveRec)
	first := check(moved)
	if hasTopic(moved, string(topics.OffersArchive)) {
		t.Error("the ARCHIVE wrote the archive again while the firing's copy was written")
	}
	again := run(moveRec)
	if res := check(again); res != first {
		t.Fatalf("the ARCHIVE seen again was answered %+v, first %+v", res, first)
	}
	archived(again)
	res, _ := answers(t, send(&schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: newOffer(id)}))
	if len(res) != 1 || res[0].Outcome != schemas.OutcomeNotFound {
		t.Fatalf("an update of the archived offer was answered %+v", res)
	}
}

// only returns the one record of out on topic.
func only(t *testing.T, out []*kgo.Record, topic string) *kgo.Record {
	t.Helper()
	var found []*kgo.Record
	for _, r := range out {
		if r.Topic == topic {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d records on %s, want 1 (outputs %v)", len(found), topic, topicsOf(out))
	}
	return found[0]
}

// TestAReleasedStageIsQueuedAgainAfterACrash: an exclusive stage's result
// that queued a waiting one, seen again (a crash after the table took it,
// before its outputs were written), emits the released stage's queue item
// again: the table marks it queued, and nothing else would ever queue it.
func TestAReleasedStageIsQueuedAgainAfterACrash(t *testing.T) {
	m := offers.NewMetrics(metrics.New())
	tt := table.NewTester(offers.Graph(offers.Config{Metrics: m, Stages: []string{"x", "y"}, Exclusive: []string{"x", "y"}}))
	id := offers.IDFrom(9)
	cmd := func(c *schemas.OfferCommand) []*kgo.Record {
		t.Helper()
		out, err := tt.Consume(topics.OffersCommands, 0, id, encodeCommand(t, c))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cmd(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: newOffer(id)})
	if !hasTopic(cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, Stage: "x", ExpectedVersion: -1, ReadVersion: -1}),
		topics.QueueTopic("x", false)) {
		t.Fatal("x not queued")
	}
	if out := cmd(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, Stage: "y", ExpectedVersion: -1, ReadVersion: -1}); hasTopic(out, topics.QueueTopic("y", false)) {
		t.Fatal("y queued while x holds the offer")
	}
	rec := tt.Value(id).(*schemas.OfferRecord)
	result := tt.Record(topics.OffersCommands, 0, id, encodeCommand(t, &schemas.OfferCommand{Kind: schemas.CommandResult, OfferID: id,
		Stage: "x", ReadVersion: rec.Version}))
	for i := range 2 {
		out, err := tt.ConsumeBatch(result)
		if err != nil {
			t.Fatal(err)
		}
		if !hasTopic(out, topics.QueueTopic("y", false)) {
			t.Fatalf("x's result (seen %d times) did not queue y: %v", i+1, topicsOf(out))
		}
	}
	if m.Recalled.Value() != 1 {
		t.Errorf("recalled %d, want the repeat answered from the record", m.Recalled.Value())
	}
}
