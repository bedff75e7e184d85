package offers

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/offerlog/offerlog/schemas"
)

var stageName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidStage reports whether name is usable as a stage name (it is part of
// topic names).
func ValidStage(name string) error {
	if !stageName.MatchString(name) {
		return fmt.Errorf("stage %q: want 1-63 characters of a-z, 0-9 and '-'", name)
	}
	return nil
}

// StageOf returns stage's part of r, and whether r has one.
func StageOf(r *schemas.OfferRecord, stage string) (schemas.StageState, bool) {
	if r == nil {
		return schemas.StageState{Stage: stage}, false
	}
	i := slices.IndexFunc(r.Stages, func(s schemas.StageState) bool { return s.Stage == stage })
	if i < 0 {
		return schemas.StageState{Stage: stage}, false
	}
	return r.Stages[i], true
}

// setStage puts st into r's stages, keeping them sorted by stage.
func setStage(r *schemas.OfferRecord, st schemas.StageState) {
	i, ok := slices.BinarySearchFunc(r.Stages, st.Stage, func(s schemas.StageState, name string) int { return strings.Compare(s.Stage, name) })
	if ok {
		r.Stages[i] = st
		return
	}
	r.Stages = slices.Insert(r.Stages, i, st)
}

// stageCommand decides the scheduler's commands:
//   - ENQUEUE puts the offer in the stage's queue unless it is there (an
//     offer is queued at most once per stage; one with Patch, the router's
//     for a stage with patches, marks a queued stage Again instead); one
//     that fires a timer (FiredAt) counts only if it is the stage's pending
//     timer, which it consumes;
//   - STAGE_RESULT saves a stage's result if the offer is still at the
//     version the stage read (offer update, new state and timer together),
//     or its patch applies to the newer one, and otherwise queues the stage
//     again on the new version (CONFLICT); a saved result of a stage marked
//     Again queues it once more, on the version it wrote;
//   - SET_TIMER sets (or with -1 clears) the stage's timer;
//   - STATE_CAS replaces the stage's state if it is at the version given.
//
// None but a result with an offer update changes the offer's version.
func stageCommand(cur *schemas.OfferRecord, in Input) Decision {
	c := in.Command
	if err := ValidStage(c.Stage); err != nil {
		return refuse(schemas.OutcomeInvalid, cur, "stage", "%v", err)
	}
	if !live(cur) {
		return refuse(schemas.OutcomeNotFound, cur, "offer_id", "no offer %s", c.OfferID)
	}
	st, _ := StageOf(cur, c.Stage)
	next := clone(cur)
	var d Decision
	switch c.Kind {
	case schemas.CommandEnqueue:
		timer := c.FiredAt > 0
		if timer && st.TimerAt != c.FiredAt {
			return refuse(schemas.OutcomeIgnored, cur, "fired_at", "timer %d is not the stage's pending one (%d): fired already", c.FiredAt, st.TimerAt)
		}
		if timer {
			st.TimerAt = 0
			d.Timer = &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: c.Stage}
		}
		exclusive := slices.Contains(in.Exclusive, c.Stage)
		if st.Waiting {
			if !timer {
				return refuse(schemas.OutcomeIgnored, cur, "stage", "%s waits for the offer already", c.Stage)
			}
			setStage(next, st)
			return stateWritten(next, in, d, st.Version)
		}
		if st.Queued {
			if !timer && (!c.Patch || st.Again) {
				return refuse(schemas.OutcomeIgnored, cur, "stage", "already in the queue of %s", c.Stage)
			}
			// A stage with patches queued already: its result, which may
			// apply to this newer version without seeing it, queues it
			// once more (Again).
			st.Again = st.Again || c.Patch && !timer
		} else if exclusive && holder(cur, in.Exclusive) != "" {
			// Another exclusive stage holds the offer: this one waits for
			// its result (one stage at a time, where stages ask for it).
			st.Waiting = true
		} else {
			st.Queued = true
			d.Queue = &schemas.QueueItem{OfferID: cur.Offer.ID, Stage: c.Stage, Version: cur.Version, StateVersion: st.Version, Low: c.Low, At: in.At}
		}
		setStage(next, st)
		return stateWritten(next, in, d, st.Version)

	case schemas.CommandSetTimer:
		due := max(c.TimerAt, 0)
		if st.TimerAt == due {
			return refuse(schemas.OutcomeIgnored, cur, "timer_at", "timer already so")
		}
		st.TimerAt = due
		setStage(next, st)
		d.Timer = &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: c.Stage, DueAt: due}
		return stateWritten(next, in, d, st.Version)

	case schemas.CommandStateCAS:
		if c.State == nil {
			return refuse(schemas.OutcomeInvalid, cur, "state", "missing")
		}
		if c.State.Version != st.Version {
			d := refuse(schemas.OutcomeConflict, nil, "version", "state of %s is at version %d, not %d", c.Stage, st.Version, c.State.Version)
			d.Version = st.Version
			return d
		}
		st.TypeURL, st.Value, st.Version = c.State.TypeURL, c.State.Value, st.Version+1
		setStage(next, st)
		return stateWritten(next, in, d, st.Version)

	case schemas.CommandResult:
		if !st.Queued {
			return refuse(schemas.OutcomeIgnored, cur, "stage", "offer is not in the queue of %s: a result already saved", c.Stage)
		}
		if c.Patch && c.Offer != nil {
			if bad := slices.DeleteFunc(slices.Clone(c.PatchFields), func(f string) bool { return slices.Contains(Patchable, f) }); len(bad) > 0 {
				return refuse(schemas.OutcomeInvalid, cur, "patch_fields", "stage %s: %v cannot be patched (patchable: %v)", c.Stage, bad, Patchable)
			}
		}
		// A patch of fields that did not change since the stage read the
		// offer applies to the current version (gost-scheduler.md: patches,
		// fewer conflicts when stages touch one offer).
		patchApplies := c.Patch && c.Offer != nil && !patchConflicts(cur, c)
		if c.ReadVersion != cur.Version && !patchApplies {
			// Discarded: the stage runs again on the new version.
			d := refuse(schemas.OutcomeConflict, cur, "read_version", "offer is at version %d, the stage read %d", cur.Version, c.ReadVersion)
			d.Queue = &schemas.QueueItem{OfferID: cur.Offer.ID, Stage: c.Stage, Version: cur.Version, StateVersion: st.Version, At: in.At}
			return d
		}
		st.Queued = false
		requeue := st.Again && c.Failed == ""
		st.Again = false
		if c.Failed != "" {
			// Given up, or refused: out of the queue (a redrive or the next
			// change asks the stage again), nothing else touched.
			setStage(next, st)
			d.Queue = release(next, in)
			return stateWritten(next, in, d, st.Version)
		}
		if c.State != nil {
			st.TypeURL, st.Value = c.State.TypeURL, c.State.Value
		}
		st.Version++
		switch {
		case c.TimerAt > 0 && c.TimerAt != st.TimerAt:
			st.TimerAt = c.TimerAt
			d.Timer = &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: c.Stage, DueAt: st.TimerAt}
		case c.TimerAt < 0 && st.TimerAt != 0:
			st.TimerAt = 0
			d.Timer = &schemas.StageTimer{OfferID: cur.Offer.ID, Stage: c.Stage}
		}
		st.Queued = requeue // an outside change came while it worked: again
		setStage(next, st)
		if c.Offer == nil {
			d = stateWritten(next, in, d, cur.Version)
		} else {
			o := *c.Offer
			if c.Patch {
				o = cur.Offer
				o.Attributes, o.Photos = slices.Clone(o.Attributes), slices.Clone(o.Photos)
				applyPatch(&o, c.Offer, c.PatchFields)
			}
			o.ID, o.SellerID, o.ExternalID, o.CreatedAt = cur.Offer.ID, cur.Offer.SellerID, cur.Offer.ExternalID, cur.Offer.CreatedAt
			if e := Validate(&o); e != nil {
				return refuse(schemas.OutcomeInvalid, cur, e.Field, "stage %s: %s", c.Stage, e.Reason)
			}
			if o.Status == "" {
				o.Status = cur.Offer.Status
			}
			o.UpdatedAt = in.At
			o.Photos = mergePhotos(cur.Offer.Photos, o.Photos)
			next.Offer = o
			sell(next)
			timer := d.Timer
			d = written(next, cur, in, "")
			d.Timer = timer
		}
		if requeue {
			d.Queue = &schemas.QueueItem{OfferID: cur.Offer.ID, Stage: c.Stage, Version: next.Version, StateVersion: st.Version, At: in.At}
		} else {
			d.Queue = release(next, in)
		}
		d.Effect = &schemas.StageEffect{Stage: c.Stage, Offer: next.Offer, Version: next.Version, State: st,
			Changed: c.Offer != nil, At: in.At}
		return d
	}
	return refuse(schemas.OutcomeInvalid, cur, "kind", "unknown command %q", c.Kind)
}

// holder returns the exclusive stage that holds r (is queued for it), ""
// if none does.
func holder(r *schemas.OfferRecord, exclusive []string) string {
	for _, st := range r.Stages {
		if st.Queued && slices.Contains(exclusive, st.Stage) {
			return st.Stage
		}
	}
	return ""
}

// release queues the first exclusive stage (by name) that waits for next,
// once no exclusive stage holds it, and returns its queue item; nil if
// none is to be queued. next is changed in place.
func release(next *schemas.OfferRecord, in Input) *schemas.QueueItem {
	if len(in.Exclusive) == 0 || holder(next, in.Exclusive) != "" {
		return nil
	}
	for i, st := range next.Stages {
		if st.Waiting {
			st.Waiting, st.Queued = false, true
			next.Stages[i] = st
			return &schemas.QueueItem{OfferID: next.Offer.ID, Stage: st.Stage, Version: next.Version, StateVersion: st.Version, At: in.At}
		}
	}
	return nil
}

// stateWritten is the decision to write next, changed only in its stage
// parts; its answer carries version (the state's, or the offer's).
func stateWritten(next *schemas.OfferRecord, in Input, d Decision, version int64) Decision {
	d.Outcome, d.Record, d.StateOnly, d.Version = schemas.OutcomeOK, next, true, version
	Remember(next, in.Partition, in.Offset, d)
	return d
}

// Fields of an offer that changes name, for stages' interests.
var Fields = []string{"category", "title", "description", "price", "currency", "attributes", "photos", "status", "moderation"}

// ChangedFields returns the fields of next that differ from prev (every
// field when prev is nil: a new offer, or a redelivery that cannot tell).
func ChangedFields(prev, next *schemas.OfferRecord) []string {
	if prev == nil {
		return slices.Clone(Fields)
	}
	a, b := &prev.Offer, &next.Offer
	diff := [...]bool{ // in Fields' order
		a.Category != b.Category, a.Title != b.Title, a.Description != b.Description,
		(a.Price == nil) != (b.Price == nil) || (a.Price != nil && b.Price != nil && *a.Price != *b.Price),
		a.Currency != b.Currency, !slices.Equal(a.Attributes, b.Attributes),
		!slices.Equal(a.Photos, b.Photos), a.Status != b.Status,
		prev.Moderation.Banned != next.Moderation.Banned || !slices.Equal(prev.Moderation.Reasons, next.Moderation.Reasons),
	}
	out := make([]string, 0, len(Fields))
	for i, f := range Fields {
		if diff[i] {
			out = append(out, f)
		}
	}
	return out
}

// Public is what readers of offers.events and scheduler.effects see of a
// stage's state: its version, queue mark and timer, never its private
// contents (the stage reads them through the scheduler and its push hook).
func Public(st schemas.StageState) schemas.StageState {
	st.TypeURL, st.Value = "", nil
	return st
}

// PublicStages is Public of every stage's state.
func PublicStages(sts []schemas.StageState) []schemas.StageState {
	out := make([]schemas.StageState, len(sts))
	for i, st := range sts {
		out[i] = Public(st)
	}
	return out
}

// Patchable are the fields a stage's patch may set.
var Patchable = []string{"category", "title", "description", "price", "currency", "attributes", "photos", "status"}

// applyPatch copies fields of from into o.
func applyPatch(o, from *schemas.Offer, fields []string) {
	for _, f := range fields {
		switch f {
		case "category":
			o.Category = from.Category
		case "title":
			o.Title = from.Title
		case "description":
			o.Description = from.Description
		case "price":
			o.Price = from.Price
		case "currency":
			o.Currency = from.Currency
		case "attributes":
			o.Attributes = slices.Clone(from.Attributes)
		case "photos":
			o.Photos = slices.Clone(from.Photos)
		case "status":
			o.Status = from.Status
		}
	}
}

// patchConflicts reports whether a field c patches changed in r after the
// version the stage read.
func patchConflicts(r *schemas.OfferRecord, c *schemas.OfferCommand) bool {
	return slices.ContainsFunc(c.PatchFields, func(f string) bool { return FieldVersion(r, f) > c.ReadVersion })
}

// FieldVersion returns the version that last changed field f of r: its
// current version for a record written before they were kept (any patch
// of an older version then conflicts, as a whole result does).
func FieldVersion(r *schemas.OfferRecord, f string) int64 {
	for _, fv := range r.FieldVersions {
		if fv.Field == f {
			return fv.Version
		}
	}
	if len(r.FieldVersions) == 0 {
		return r.Version
	}
	return 0
}

// noteFieldVersions notes next's version for every field that differs
// from cur (every field of a new offer), in Fields order.
func noteFieldVersions(next, cur *schemas.OfferRecord) {
	changed := ChangedFields(cur, next)
	if cur != nil && len(cur.FieldVersions) == 0 {
		// Written before field versions were kept: what changed before
		// is unknown, so every field counts as changed now.
		changed = slices.Clone(Fields)
	}
	for _, f := range changed {
		i := slices.IndexFunc(next.FieldVersions, func(fv schemas.FieldVersion) bool { return fv.Field == f })
		if i < 0 {
			next.FieldVersions = append(next.FieldVersions, schemas.FieldVersion{Field: f})
			i = len(next.FieldVersions) - 1
		}
		next.FieldVersions[i].Version = next.Version
	}
}
