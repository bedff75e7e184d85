package offers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"

	"github.com/offerlog/offerlog/schemas"
)

// ArchiveStage names the archive's timer on scheduler.timers (key
// offer_id/archive): the timer service fires it, as a stage's, with an
// ENQUEUE of this stage. No configured stage may take the name.
const ArchiveStage = "archive"

// DefaultArchiveAfter is how long an offer stays in offers-table after it
// is deleted, sold or expired, when the aggregate's configuration names
// no other time.
const DefaultArchiveAfter = 30 * 24 * time.Hour

// Terminal reports whether an offer of status s is done with: deleted,
// sold or expired. Such an offer is archived ArchiveAfter later.
func Terminal(s schemas.OfferStatus) bool {
	return s == schemas.OfferDeleted || s == schemas.OfferSold || s == schemas.OfferExpired
}

// armArchive sets next's archive time after a write at in.At: the time it
// became terminal plus in.ArchiveAfter, kept while it stays terminal, 0
// when it is not (or archiving is off); d gets the timer to write when the
// time changed.
func armArchive(next *schemas.OfferRecord, in Input, d *Decision) {
	var due int64
	if Terminal(next.Offer.Status) && in.ArchiveAfter > 0 {
		due = next.ArchiveAt
		if due == 0 {
			due = in.At.Add(in.ArchiveAfter).UnixMilli()
		}
	}
	if due == next.ArchiveAt {
		return
	}
	next.ArchiveAt = due
	d.ArchiveTimer = &schemas.StageTimer{OfferID: next.Offer.ID, Stage: ArchiveStage, DueAt: due}
}

// arm decides an ARM_ARCHIVE: an offer done with before archiving existed
// (terminal, without an archive time) gets one, from the command's time,
// and its timer; the offer itself is unchanged (no version, no event).
func arm(cur *schemas.OfferRecord, in Input) Decision {
	switch {
	case cur == nil:
		return refuse(schemas.OutcomeIgnored, nil, "offer_id", "no offer %s", in.Command.OfferID)
	case cur.Archived || cur.ArchiveAt != 0 || !Terminal(cur.Offer.Status) || in.ArchiveAfter <= 0:
		return refuse(schemas.OutcomeIgnored, cur, "offer_id", "offer %s has its archive time, or none to have (status %s, archived %v, archiving after %v)",
			cur.Offer.ID, cur.Offer.Status, cur.Archived, in.ArchiveAfter)
	}
	next := clone(cur)
	d := Decision{Outcome: schemas.OutcomeOK, Version: cur.Version, Record: next, StateOnly: true}
	armArchive(next, in, &d)
	Remember(next, in.Partition, in.Offset, d)
	return d
}

// Unarmed reports whether r is an offer done with before archiving existed:
// terminal, not archived, without an archive time.
func Unarmed(r *schemas.OfferRecord) bool {
	return Terminal(r.Offer.Status) && !r.Archived && r.ArchiveAt == 0
}

// ArmArchives sends an ARM_ARCHIVE for every offer of offers-table done
// with before archiving existed (Unarmed), reading the table as it is now
// (streams.ReadLatest), a thousand commands at a time, and returns how many
// it sent. Run it once after an upgrade; a second run finds none.
func ArmArchives(ctx context.Context, kafka *streams.Cluster) (int, error) {
	prod, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond), kgo.ClientID("offerlog-archive-arm"))
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	var n int
	var cmds []*schemas.OfferCommand
	var sendErr error
	err = streams.ReadLatest(ctx, kafka, string(topics.OffersTable), func(r *kgo.Record) {
		var rec schemas.OfferRecord
		if sendErr != nil || schemas.OfferRecords.Decode(r.Value, &rec) != nil || !Unarmed(&rec) {
			return
		}
		cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandArmArchive, OfferID: rec.Offer.ID,
			SellerID: rec.Offer.SellerID, ExpectedVersion: -1, ReadVersion: -1})
		if len(cmds) == 1000 {
			sendErr, n, cmds = SendCommands(ctx, prod, cmds), n+len(cmds), nil
		}
	})
	if err = errors.Join(err, sendErr); err == nil {
		err, n = SendCommands(ctx, prod, cmds), n+len(cmds)
	}
	if err != nil {
		return n, fmt.Errorf("arm the archive: %w", err)
	}
	return n, nil
}

// SendCommands appends commands to offers.commands, keyed by offer id
// (acks=all); their answers are not awaited: the aggregate decides and
// counts them.
func SendCommands(ctx context.Context, prod *kgo.Client, cmds []*schemas.OfferCommand) error {
	if len(cmds) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, 0, len(cmds))
	for _, c := range cmds {
		data, err := schemas.OfferCommands.Encode(c)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(c.OfferID), Value: data})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("send commands: %w", err)
	}
	return nil
}

// archive decides the firing of an offer's archive timer (an ENQUEUE of
// ArchiveStage): the record is marked Archived, read-only from then on,
// written to offers.archive, and an ARCHIVE carrying it is appended to
// offers.commands; that second command removes it from the table. Two
// commands, because a batch writes the table's changelog before its
// outputs: a record removed in the batch that writes it to the archive
// would be lost by a crash between the two. Written a batch earlier, the
// archive holds the record before the table drops it, and an ARCHIVE that
// finds the record gone (seen again after a crash) writes it again from
// the copy it carries.
func archive(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	switch {
	case c.FiredAt <= 0:
		return refuse(schemas.OutcomeInvalid, cur, "fired_at", "the %s timer is fired by the timer service, with its due time", ArchiveStage)
	case cur == nil || cur.Archived:
		return refuse(schemas.OutcomeIgnored, cur, "offer_id", "offer %s is archived already", c.OfferID)
	case cur.ArchiveAt != c.FiredAt:
		return refuse(schemas.OutcomeIgnored, cur, "fired_at", "timer %d is not the offer's archive time (%d): fired already, or moved", c.FiredAt, cur.ArchiveAt)
	case !Terminal(cur.Offer.Status) || in.ArchiveAfter <= 0:
		return refuse(schemas.OutcomeIgnored, cur, "fired_at", "offer %s is not to be archived (status %s, archiving after %v)", c.OfferID, cur.Offer.Status, in.ArchiveAfter)
	}
	next := clone(cur)
	next.Archived = true
	d := Decision{Outcome: schemas.OutcomeOK, Version: cur.Version, Record: next, StateOnly: true, Archive: next,
		ArchiveTimer: &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: ArchiveStage}}
	Remember(next, in.Partition, in.Offset, d)
	f, err := archiveCommand(next)
	if err != nil {
		return refuse(schemas.OutcomeInvalid, cur, "offer_id", "%v", err)
	}
	d.Forward = f
	return d
}

// archiveCommand returns the ARCHIVE of r, a record marked Archived.
func archiveCommand(r *schemas.OfferRecord) (*schemas.OfferCommand, error) {
	data, err := TableCodec.Encode(r)
	if err != nil {
		return nil, fmt.Errorf("the archived record of %s does not encode: %w", r.Offer.ID, err)
	}
	return &schemas.OfferCommand{Kind: schemas.CommandArchive, OfferID: r.Offer.ID, SellerID: r.Offer.SellerID,
		ExpectedVersion: -1, ReadVersion: -1, Record: data}, nil
}

// archived decides an ARCHIVE: the record it carries leaves the table (a
// tombstone). Found gone (the ARCHIVE seen again after a crash, or a
// second one), the record is written to the archive again, as a crash may
// have lost it (see archive); the answer is the same either way.
func archived(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	if len(c.Record) == 0 {
		return refuse(schemas.OutcomeInvalid, cur, "record", "missing")
	}
	rec := new(schemas.OfferRecord)
	err := schemas.OfferRecords.Decode(c.Record, rec)
	switch {
	case err != nil:
		return refuse(schemas.OutcomeInvalid, cur, "record", "does not decode: %v", err)
	case rec.Offer.ID != c.OfferID || !rec.Archived:
		return refuse(schemas.OutcomeInvalid, cur, "record", "not an archived record of offer %s", c.OfferID)
	case cur != nil && (!cur.Archived || cur.Version != rec.Version):
		return refuse(schemas.OutcomeIgnored, cur, "record", "offer %s is at version %d, archived %v: not the record archived (version %d)",
			c.OfferID, cur.Version, cur.Archived, rec.Version)
	}
	d := Decision{Outcome: schemas.OutcomeOK, Reason: "archived", Version: rec.Version, Remove: rec}
	if cur == nil {
		d.Archive = rec
	}
	return d
}
