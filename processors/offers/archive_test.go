package offers

import (
	"testing"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

// archiveInput is cmd(c, off) with archiving after a day.
func archiveInput(c *schemas.OfferCommand, off int64) Input {
	in := cmd(c, off)
	in.ArchiveAfter = 24 * time.Hour
	return in
}

// TestTheArchiveTimeIsArmedWhenAnOfferIsDoneWith: a sale arms the archive
// timer at the sale's time plus ArchiveAfter; a later change of the sold
// offer keeps it; bringing an expired offer back disarms it; a deletion
// arms it again; archiving off arms nothing.
func TestTheArchiveTimeIsArmedWhenAnOfferIsDoneWith(t *testing.T) {
	id := IDFrom(5)
	d := Decide(nil, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sample()}, 1))
	if d.Outcome != schemas.OutcomeOK || d.ArchiveTimer != nil || d.Record.ArchiveAt != 0 {
		t.Fatalf("a new offer: %+v, timer %+v", d, d.ArchiveTimer)
	}
	update := func(cur *schemas.OfferRecord, status schemas.OfferStatus, title string, off int64) Decision {
		o := sample()
		o.Status, o.Title = status, title
		return Decide(cur, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: o}, off))
	}
	sold := update(d.Record, schemas.OfferSold, "Lada", 2)
	due := t0.Add(2*time.Second + 24*time.Hour).UnixMilli()
	if sold.Record.ArchiveAt != due || sold.ArchiveTimer == nil || *sold.ArchiveTimer != (schemas.StageTimer{OfferID: id, Stage: ArchiveStage, DueAt: due}) {
		t.Fatalf("sold: archive at %d, timer %+v; want %d", sold.Record.ArchiveAt, sold.ArchiveTimer, due)
	}
	later := update(sold.Record, "", "Lada, sold", 3)
	if later.Record.ArchiveAt != due || later.ArchiveTimer != nil {
		t.Fatalf("a change of the sold offer moved its archive time: %d, timer %+v", later.Record.ArchiveAt, later.ArchiveTimer)
	}
	expired := update(later.Record, schemas.OfferExpired, "Lada", 4)
	back := update(expired.Record, schemas.OfferActive, "Lada", 5)
	if back.Record.ArchiveAt != 0 || back.ArchiveTimer == nil || back.ArchiveTimer.DueAt != 0 {
		t.Fatalf("an offer active again: archive at %d, timer %+v", back.Record.ArchiveAt, back.ArchiveTimer)
	}
	gone := Decide(back.Record, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandDelete, OfferID: id, SellerID: "s1", ExpectedVersion: -1}, 6))
	if want := t0.Add(6*time.Second + 24*time.Hour).UnixMilli(); gone.Record.ArchiveAt != want || gone.ArchiveTimer.DueAt != want {
		t.Fatalf("deleted: archive at %d, want %d", gone.Record.ArchiveAt, want)
	}
	off := Decide(back.Record, cmd(&schemas.OfferCommand{Kind: schemas.CommandDelete, OfferID: id, SellerID: "s1", ExpectedVersion: -1}, 6))
	if off.Record.ArchiveAt != 0 || off.ArchiveTimer != nil {
		t.Fatalf("archiving off: archive at %d, timer %+v", off.Record.ArchiveAt, off.ArchiveTimer)
	}
}

// TestAnArchivedOfferIsReadOnly: once its archive timer fired, an offer is
// neither updated, deleted, moderated nor given to a stage; a timer that
// is not its archive time, or fired again, changes nothing; an ARCHIVE
// with a record that is not the archived one is refused.
func TestAnArchivedOfferIsReadOnly(t *testing.T) {
	id := IDFrom(6)
	d := Decide(nil, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sample()}, 1))
	d = Decide(d.Record, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandDelete, OfferID: id, SellerID: "s1", ExpectedVersion: -1}, 2))
	due := d.Record.ArchiveAt
	fire := func(cur *schemas.OfferRecord, at int64, off int64) Decision {
		return Decide(cur, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, Stage: ArchiveStage, FiredAt: at, ExpectedVersion: -1, ReadVersion: -1}, off))
	}
	if early := fire(d.Record, due-1, 3); early.Outcome != schemas.OutcomeIgnored || early.Record.Archived {
		t.Fatalf("a firing of another time: %+v", early)
	}
	if unfired := fire(d.Record, 0, 3); unfired.Outcome != schemas.OutcomeInvalid {
		t.Fatalf("an ENQUEUE of the archive without a due time: %+v", unfired)
	}
	f := fire(d.Record, due, 4)
	if f.Outcome != schemas.OutcomeOK || !f.Record.Archived || f.Forward == nil || f.Forward.Kind != schemas.CommandArchive ||
		f.ArchiveTimer == nil || f.ArchiveTimer.DueAt != 0 || f.Remove != nil || f.Archive != f.Record {
		t.Fatalf("the firing: %+v", f)
	}
	cur := f.Record
	for i, c := range []*schemas.OfferCommand{
		{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sample()},
		{Kind: schemas.CommandDelete, OfferID: id, SellerID: "s1", ExpectedVersion: -1},
		{Kind: schemas.CommandModeration, OfferID: id, Opinion: &schemas.ModerationOpinion{OfferID: id, Banned: true}},
		{Kind: schemas.CommandEnqueue, OfferID: id, Stage: "expiry", ExpectedVersion: -1, ReadVersion: -1},
		{Kind: schemas.CommandEnqueue, OfferID: id, Stage: ArchiveStage, FiredAt: due, ExpectedVersion: -1, ReadVersion: -1},
	} {
		got := Decide(cur, archiveInput(c, int64(10+i)))
		if got.Outcome == schemas.OutcomeOK || got.Remove != nil || got.Archive != nil || got.Forward != nil || (got.Record != nil && !got.StateOnly) {
			t.Errorf("%s of an archived offer: %+v", c.Kind, got)
		}
	}
	other := *cur
	other.Archived = false
	data, err := TableCodec.Encode(&other)
	if err != nil {
		t.Fatal(err)
	}
	bad := Decide(cur, archiveInput(&schemas.OfferCommand{Kind: schemas.CommandArchive, OfferID: id, Record: data}, 20))
	if bad.Outcome != schemas.OutcomeInvalid || bad.Remove != nil {
		t.Fatalf("an ARCHIVE of a record not archived: %+v", bad)
	}
	moved := Decide(cur, archiveInput(f.Forward, 21))
	if moved.Outcome != schemas.OutcomeOK || moved.Remove == nil || moved.Remove.Version != cur.Version || moved.Archive != nil || moved.Record != nil {
		t.Fatalf("the ARCHIVE: %+v", moved)
	}
	again := Decide(nil, archiveInput(f.Forward, 21))
	if again.Outcome != moved.Outcome || again.Version != moved.Version || again.Remove == nil || again.Archive == nil {
		t.Fatalf("the ARCHIVE seen again after its removal: %+v, first %+v", again, moved)
	}
}

// TestAnOfferDoneWithBeforeArchivingIsArmed: an ARM_ARCHIVE gives a sold
// offer without an archive time one, from the command's time, leaving the
// offer and its version as they were; an offer with its time, an active
// one, or one of a platform that does not archive, is left alone.
func TestAnOfferDoneWithBeforeArchivingIsArmed(t *testing.T) {
	id := IDFrom(8)
	d := Decide(nil, cmd(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sample()}, 1))
	o := sample()
	o.Status = schemas.OfferSold
	sold := Decide(d.Record, cmd(&schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: o}, 2))
	if !Unarmed(sold.Record) || Unarmed(d.Record) {
		t.Fatalf("sold without archiving: unarmed %v; active: unarmed %v", Unarmed(sold.Record), Unarmed(d.Record))
	}
	armCmd := &schemas.OfferCommand{Kind: schemas.CommandArmArchive, OfferID: id, ExpectedVersion: -1, ReadVersion: -1}
	got := Decide(sold.Record, archiveInput(armCmd, 10))
	want := t0.Add(10*time.Second + 24*time.Hour).UnixMilli()
	if got.Outcome != schemas.OutcomeOK || !got.StateOnly || got.Record.ArchiveAt != want || got.Record.Version != sold.Record.Version ||
		got.ArchiveTimer == nil || got.ArchiveTimer.DueAt != want || Unarmed(got.Record) {
		t.Fatalf("the arming: %+v, timer %+v", got, got.ArchiveTimer)
	}
	for name, c := range map[string]struct {
		cur *schemas.OfferRecord
		in  Input
	}{
		"armed already": {got.Record, archiveInput(armCmd, 11)},
		"active":        {d.Record, archiveInput(armCmd, 11)},
		"not archiving": {sold.Record, cmd(armCmd, 11)},
	} {
		if again := Decide(c.cur, c.in); again.Outcome != schemas.OutcomeIgnored || again.ArchiveTimer != nil {
			t.Errorf("%s: %+v", name, again)
		}
	}
}
