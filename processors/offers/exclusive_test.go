package offers

import (
	"testing"

	"github.com/offerlog/offerlog/schemas"
)

// TestExclusiveStagesHoldTheOfferOneAtATime: an exclusive stage asked for
// an offer another exclusive stage holds waits (no queue item); a stage
// that is not exclusive runs beside them; the holder's result, saved or
// given up, queues the first waiting one on the version it left; a waiting
// stage asked again is ignored; its timer firing is consumed.
func TestExclusiveStagesHoldTheOfferOneAtATime(t *testing.T) {
	id := IDFrom(7)
	excl := []string{"a", "b", "c"}
	off := int64(0)
	do := func(cur *schemas.OfferRecord, c *schemas.OfferCommand) Decision {
		off++
		in := cmd(c, off)
		in.Exclusive = excl
		return Decide(cur, in)
	}
	enqueue := func(stage string) *schemas.OfferCommand {
		return &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, Stage: stage, ExpectedVersion: -1, ReadVersion: -1}
	}
	d := do(nil, &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sample()})
	state := func(r *schemas.OfferRecord, stage string) schemas.StageState { st, _ := StageOf(r, stage); return st }

	a := do(d.Record, enqueue("a"))
	if a.Queue == nil || a.Queue.Stage != "a" || !state(a.Record, "a").Queued {
		t.Fatalf("a, the first exclusive stage: %+v", a)
	}
	b := do(a.Record, enqueue("b"))
	if b.Outcome != schemas.OutcomeOK || b.Queue != nil || !state(b.Record, "b").Waiting || state(b.Record, "b").Queued {
		t.Fatalf("b while a holds the offer: %+v", b)
	}
	c := do(b.Record, enqueue("c"))
	if c.Queue != nil || !state(c.Record, "c").Waiting {
		t.Fatalf("c while a holds the offer: %+v", c)
	}
	if again := do(c.Record, enqueue("b")); again.Outcome != schemas.OutcomeIgnored {
		t.Fatalf("b asked again while it waits: %+v", again)
	}
	free := do(c.Record, enqueue("free"))
	if free.Queue == nil || free.Queue.Stage != "free" {
		t.Fatalf("a stage that is not exclusive while a holds the offer: %+v", free)
	}
	// a's result, an offer update: b (the first waiting by name) is
	// queued on the version a wrote; c still waits.
	o := *sample()
	o.Title = "by a"
	res := do(free.Record, &schemas.OfferCommand{Kind: schemas.CommandResult, OfferID: id, Stage: "a", ReadVersion: free.Record.Version, Offer: &o})
	if res.Outcome != schemas.OutcomeOK || res.Queue == nil || res.Queue.Stage != "b" || res.Queue.Version != res.Record.Version ||
		state(res.Record, "a").Queued || !state(res.Record, "b").Queued || state(res.Record, "b").Waiting || !state(res.Record, "c").Waiting {
		t.Fatalf("a's result: queue %+v, stages %+v", res.Queue, res.Record.Stages)
	}
	// b gives up: c is queued.
	gaveUp := do(res.Record, &schemas.OfferCommand{Kind: schemas.CommandResult, OfferID: id, Stage: "b", ReadVersion: res.Record.Version, Failed: "refused"})
	if gaveUp.Queue == nil || gaveUp.Queue.Stage != "c" || !state(gaveUp.Record, "c").Queued || state(gaveUp.Record, "b").Queued {
		t.Fatalf("b given up: queue %+v, stages %+v", gaveUp.Queue, gaveUp.Record.Stages)
	}
	// Without the option the same commands run every stage at once.
	off++
	in := cmd(enqueue("b"), off)
	if plain := Decide(a.Record, in); plain.Queue == nil || plain.Queue.Stage != "b" {
		t.Fatalf("b, no stage exclusive: %+v", plain)
	}
}
