package drafts

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// The drafts group's callbacks on the table runtime's tester.

func send(t *testing.T, tt *table.Tester, r *kgo.Record) (*schemas.DraftResult, []*kgo.Record) {
	t.Helper()
	out, err := tt.ConsumeBatch(r)
	if err != nil {
		t.Fatal(err)
	}
	var res *schemas.DraftResult
	for _, o := range out {
		if o.Topic == topics.DraftsResults {
			res = new(schemas.DraftResult)
			if err := schemas.DraftResults.Decode(o.Value, res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res == nil {
		t.Fatalf("no answer among %d outputs", len(out))
	}
	return res, out
}

func command(t *testing.T, tt *table.Tester, c *schemas.DraftCommand) *kgo.Record {
	t.Helper()
	data, err := schemas.DraftCommands.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return tt.Record(topics.DraftsCommands, 0, Key(c), data)
}

// TestAPublishSeenAgainIsAnsweredAsTheFirstTime: a user's draft is made,
// published, and the publish handled again (a crash before its batch's
// mark): the same answer, the CREATE of the offer emitted again, the draft
// still published. A bad command and garbage are answered INVALID.
func TestAPublishSeenAgainIsAnsweredAsTheFirstTime(t *testing.T) {
	m := NewMetrics(metrics.New())
	tt := table.NewTester(Graph(m, 0))
	id := offers.IDFrom(9)
	cur, _ := send(t, tt, command(t, tt, &schemas.DraftCommand{Kind: schemas.DraftCurrent, User: "u1", Category: "cars", NewID: id}))
	if cur.Outcome != schemas.OutcomeOK || cur.Draft == nil || cur.Draft.ID != id {
		t.Fatalf("current: %+v", cur)
	}
	d := *cur.Draft
	price := int64(5)
	d.Offer.Title, d.Offer.Price, d.Offer.Currency = "bike", &price, "RUB"
	if saved, _ := send(t, tt, command(t, tt, &schemas.DraftCommand{Kind: schemas.DraftSave, User: "u1", Draft: &d})); saved.Outcome != schemas.OutcomeOK {
		t.Fatalf("save: %+v", saved)
	}
	publish := command(t, tt, &schemas.DraftCommand{Kind: schemas.DraftPublish, User: "u1", ExpectedID: id})
	first, out := send(t, tt, publish)
	if first.Outcome != schemas.OutcomeOK || !emits(out, topics.OffersCommands) {
		t.Fatalf("publish: %+v, outputs to %v", first, out)
	}
	again, out := send(t, tt, publish)
	if again.Outcome != first.Outcome || again.Reason != first.Reason || !emits(out, topics.OffersCommands) || m.Recalled.Value() != 1 {
		t.Fatalf("the publish seen again: %+v (first %+v), CREATE again %v, recalled %d", again, first, emits(out, topics.OffersCommands), m.Recalled.Value())
	}
	if rec, _ := tt.Value(UserKey("u1")).(*schemas.DraftRecord); rec == nil || !rec.Published {
		t.Fatalf("the draft is not published: %+v", tt.Value(UserKey("u1")))
	}
	for _, r := range []*kgo.Record{
		tt.Record(topics.DraftsCommands, 0, UserKey("u1"), []byte("garbage")),
		command(t, tt, &schemas.DraftCommand{Kind: schemas.DraftPublish, User: "u1"}), // no expected_id
	} {
		if bad, out := send(t, tt, r); bad.Outcome != schemas.OutcomeInvalid || !emits(out, topics.OffersDead) {
			t.Errorf("bad command answered %+v, dead letter %v", bad, emits(out, topics.OffersDead))
		}
	}
}

func emits(out []*kgo.Record, topic string) bool {
	for _, r := range out {
		if r.Topic == topic {
			return true
		}
	}
	return false
}
