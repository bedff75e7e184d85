package offers

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func price(p int64) *int64 { return &p }

func sample() *schemas.Offer {
	return &schemas.Offer{Category: "cars", Title: "Lada", Price: price(500), Currency: "RUB",
		Photos: []schemas.Photo{{SourceURL: "https://img/1"}}}
}

// at returns an input of a command at offset off.
func cmd(c *schemas.OfferCommand, off int64) Input {
	return Input{Topic: topics.OffersCommands, Partition: 0, Offset: off, At: t0.Add(time.Duration(off) * time.Second), Key: c.OfferID, Command: c}
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	perm := NewPermutation([]byte("0123456789abcdef"))
	for i := range uint64(1000) {
		id := IDFrom(perm.Of(i))
		if !ValidID(id) || len(id) != IDLength || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
	id := IDFrom(42)
	for i := 0; i < len(id); i++ { // every single-digit typo is caught
		for d := byte('0'); d <= '9'; d++ {
			if d == id[i] {
				continue
			}
			typo := id[:i] + string(d) + id[i+1:]
			if ValidID(typo) {
				t.Errorf("typo %s of %s accepted", typo, id)
			}
		}
	}
	for _, bad := range []string{"", "123", "0123456789a", "01234567890"} {
		if ValidID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	// Neighbouring random numbers give unrelated ids.
	if a, b := IDFrom(1000), IDFrom(1001); a[:9] == b[:9] && a[10] == b[10]+1 {
		t.Logf("%s %s", a, b)
	}
}

func TestValidate(t *testing.T) {
	ok := sample()
	ok.SellerID = "s1"
	if e := Validate(ok); e != nil {
		t.Fatalf("valid offer refused: %v", e)
	}
	tests := []struct {
		field string
		edit  func(o *schemas.Offer)
	}{
		{"seller_id", func(o *schemas.Offer) { o.SellerID = "a/b" }},
		{"category", func(o *schemas.Offer) { o.Category = "" }},
		{"title", func(o *schemas.Offer) { o.Title = "  " }},
		{"price", func(o *schemas.Offer) { o.Price = price(-1) }},
		{"price", func(o *schemas.Offer) { o.Price = price(math.MaxInt64) }},
		{"price", func(o *schemas.Offer) { o.Price = price(MaxPrice + 1) }},
		{"currency", func(o *schemas.Offer) { o.Currency = "rub" }},
		{"currency", func(o *schemas.Offer) { o.Price = nil }},
		{"status", func(o *schemas.Offer) { o.Status = schemas.OfferDeleted }},
		{"photos[0].source_url", func(o *schemas.Offer) { o.Photos[0].SourceURL = "ftp://x" }},
		{"photos[1].source_url", func(o *schemas.Offer) { o.Photos = append(o.Photos, o.Photos[0]) }},
		{"attributes.a", func(o *schemas.Offer) { o.Attributes = schemas.Attributes{{Name: "b"}, {Name: "a"}} }},
		{"offer", func(o *schemas.Offer) {
			m := map[string]string{}
			for i := range MaxAttributes {
				m[fmt.Sprint("a", i)] = strings.Repeat("x", MaxAttrValue)
			}
			o.Attributes = schemas.AttributesOf(m)
		}},
	}
	for _, tt := range tests {
		o := sample()
		o.SellerID = "s1"
		tt.edit(o)
		if e := Validate(o); e == nil || e.Field != tt.field {
			t.Errorf("want a problem with %s, got %v", tt.field, e)
		}
	}
}

func TestPresets(t *testing.T) {
	tests := []struct {
		status schemas.OfferStatus
		banned bool
		want   []string
	}{
		{schemas.OfferActive, false, []string{PresetAll, PresetActive}},
		{schemas.OfferInactive, false, []string{PresetAll, PresetInactive}},
		{schemas.OfferExpired, false, []string{PresetAll, PresetExpired}},
		{schemas.OfferSold, false, []string{PresetAll, PresetSold}},
		{schemas.OfferActive, true, []string{PresetAll, PresetBanned}},
		{schemas.OfferSold, true, []string{PresetAll, PresetBanned}},
		{schemas.OfferDeleted, true, []string{}},
	}
	for _, tt := range tests {
		if got := PresetsOf(&schemas.Offer{Status: tt.status}, tt.banned); !slices.Equal(got, tt.want) {
			t.Errorf("%s banned=%v: %v, want %v", tt.status, tt.banned, got, tt.want)
		}
	}
	a, b := PresetKey("s", PresetAll, t0, "1"), PresetKey("s", PresetAll, t0.Add(time.Millisecond), "2")
	if b >= a {
		t.Errorf("newer offer's key %s does not sort before %s", b, a)
	}
}

func TestDecideLifecycle(t *testing.T) {
	id := IDFrom(7)
	create := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1,
		Offer: sample(), DraftOwner: "user:s1", DraftID: id}
	d := Decide(nil, cmd(create, 1))
	if d.Outcome != schemas.OutcomeOK || d.Version != 1 || d.Record.Offer.Status != schemas.OfferActive ||
		!d.Record.Offer.CreatedAt.Equal(t0.Add(time.Second)) || len(d.Photos) != 1 || d.Record.Offer.Photos[0].Status != schemas.PhotoPending {
		t.Fatalf("create: %+v", d)
	}
	r := d.Record
	if !slices.Equal(r.Summary.Presets, []string{PresetAll, PresetActive}) || len(r.Previous.Presets) != 0 {
		t.Errorf("summaries %+v %+v", r.Summary, r.Previous)
	}
	// A retry of the same publish is the same offer; another origin collides.
	if d := Decide(r, cmd(create, 2)); d.Outcome != schemas.OutcomeOK || !unchanged(d, r) || d.Version != 1 {
		t.Errorf("retried create: %+v", d)
	}
	other := *create
	other.DraftID = IDFrom(8)
	if d := Decide(r, cmd(&other, 3)); d.Outcome != schemas.OutcomeCollision {
		t.Errorf("colliding create: %+v", d)
	}
	// A colliding publish moves along its draft's chain of ids, the same
	// chain every time, and stops after MaxHops.
	d = Decide(r, cmd(&other, 3))
	if f := d.Forward; f == nil || f.OfferID != NextID(other.DraftOwner, other.DraftID, id) || f.Hop != 1 ||
		f.DraftID != other.DraftID || f.Offer != other.Offer || d.Record != nil {
		t.Errorf("colliding publish forwarded %+v", d.Forward)
	}
	last := other
	last.Hop = MaxHops - 1
	if d := Decide(r, cmd(&last, 3)); d.Outcome != schemas.OutcomeCollision || d.Forward != nil {
		t.Errorf("a publish at the end of its chain: %+v", d)
	}
	feedOther := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1,
		Offer: sample(), ExternalID: "vin", TaskID: 1}
	if d := Decide(r, cmd(feedOther, 3)); d.Outcome != schemas.OutcomeCollision || d.Forward != nil {
		t.Errorf("a colliding feed create: %+v", d)
	}
	// A feed item's create retried is done; of a later task, the loader
	// is told to upsert it.
	fr := Decide(nil, cmd(feedOther, 3)).Record
	if d := Decide(fr, cmd(feedOther, 4)); d.Outcome != schemas.OutcomeOK || !unchanged(d, fr) {
		t.Errorf("feed create retried: %+v", d)
	}
	later := *feedOther
	later.TaskID = 2
	if d := Decide(fr, cmd(&later, 4)); d.Outcome != schemas.OutcomeConflict || !strings.Contains(d.Reason, "task_id") {
		t.Errorf("feed create of a later task: %+v", d)
	}
	// The same origin with other content is a conflict naming the fields.
	changed := *create
	changed.Offer = sample()
	changed.Offer.Title, changed.Offer.Price = "other", price(1)
	if d := Decide(r, cmd(&changed, 3)); d.Outcome != schemas.OutcomeConflict || d.Field != "offer" ||
		!strings.Contains(d.Reason, "title, price") || d.Version != 1 || !unchanged(d, r) {
		t.Errorf("create of the same draft with other content: %+v", d)
	}

	upd := &schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: 1, Offer: sample()}
	upd.Offer.Status = schemas.OfferSold
	upd.Offer.Photos = append(upd.Offer.Photos, schemas.Photo{SourceURL: "https://img/2"})
	d = Decide(r, cmd(upd, 4))
	if d.Outcome != schemas.OutcomeOK || d.Version != 2 || !d.Record.Billing.Sold || d.Record.Billing.SoldPrice != 500 ||
		len(d.Photos) != 1 || d.Photos[0].SourceURL != "https://img/2" || !d.Record.Offer.CreatedAt.Equal(r.Offer.CreatedAt) {
		t.Fatalf("update: %+v", d)
	}
	if !slices.Equal(d.Record.Previous.Presets, r.Summary.Presets) {
		t.Errorf("previous summary %+v", d.Record.Previous)
	}
	if stale := Decide(d.Record, cmd(upd, 5)); stale.Outcome != schemas.OutcomeConflict || stale.Version != 2 || !unchanged(stale, d.Record) {
		t.Errorf("stale update: %+v", stale)
	}
	if rr, ok := Recall(d.Record, 0, 4); !ok || rr.Version != 2 {
		t.Errorf("update not table.Remembered: %v %+v", ok, rr)
	}
	r = d.Record
	// Sold again later: counted once, at the first price.
	upd2 := &schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: -1, Offer: sample()}
	upd2.Offer.Price = price(900)
	upd2.Offer.Status = schemas.OfferSold
	if d := Decide(r, cmd(upd2, 6)); d.Record.Billing.SoldPrice != 500 {
		t.Errorf("second sale changed the price sold at: %+v", d.Record.Billing)
	}
	wrongSeller := *upd2
	wrongSeller.SellerID = "s2"
	if d := Decide(r, cmd(&wrongSeller, 7)); d.Outcome != schemas.OutcomeNotFound {
		t.Errorf("update by another seller: %+v", d)
	}
	del := &schemas.OfferCommand{Kind: schemas.CommandDelete, OfferID: id, SellerID: "s1", ExpectedVersion: 2}
	d = Decide(r, cmd(del, 8))
	if d.Outcome != schemas.OutcomeOK || d.Record.Offer.Status != schemas.OfferDeleted || len(d.Record.Summary.Presets) != 0 {
		t.Fatalf("delete: %+v", d)
	}
	if d := Decide(d.Record, cmd(upd2, 9)); d.Outcome != schemas.OutcomeNotFound {
		t.Errorf("update of a deleted offer: %+v", d)
	}
}

func TestDecideBadCommands(t *testing.T) {
	id := IDFrom(9)
	tests := []struct {
		name  string
		c     *schemas.OfferCommand
		key   string
		field string
	}{
		{"key mismatch", &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", Offer: sample()}, IDFrom(10), "offer_id"},
		{"not an id", &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: "42", SellerID: "s", Offer: sample()}, "42", "offer_id"},
		{"unknown kind", &schemas.OfferCommand{Kind: "MERGE", OfferID: id, SellerID: "s"}, id, "kind"},
		{"no offer", &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s"}, id, "offer"},
		{"invalid offer", &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", Offer: &schemas.Offer{Category: "x"}}, id, "title"},
	}
	for _, tt := range tests {
		in := cmd(tt.c, 1)
		in.Key = tt.key
		if d := Decide(nil, in); d.Outcome != schemas.OutcomeInvalid || d.Field != tt.field || d.Record != nil {
			t.Errorf("%s: %+v", tt.name, d)
		}
	}
}

func TestDecideFeeds(t *testing.T) {
	id := IDFrom(11)
	create := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", ExpectedVersion: -1,
		Offer: sample(), TaskID: 5, ExternalID: "vin-1"}
	r := Decide(nil, cmd(create, 1)).Record
	if r.FeedTask != 5 || r.Offer.ExternalID != "vin-1" {
		t.Fatalf("feed create: %+v", r)
	}
	// A retried feed create (same seller, same external id) is the same offer.
	if d := Decide(r, cmd(create, 2)); d.Outcome != schemas.OutcomeOK || !unchanged(d, r) {
		t.Errorf("retried feed create: %+v", d)
	}
	r.Moderation.Banned = true
	up := &schemas.OfferCommand{Kind: schemas.CommandFeedUpsert, OfferID: id, SellerID: "s", ExpectedVersion: -1, Offer: sample(), TaskID: 4}
	if d := Decide(r, cmd(up, 3)); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("item of an older task: %+v", d)
	}
	up.TaskID = 6
	up.Offer.Title = "Lada 2"
	d := Decide(r, cmd(up, 4))
	if d.Outcome != schemas.OutcomeOK || d.Record.FeedTask != 6 || !d.Record.Moderation.Banned || d.Record.Offer.Title != "Lada 2" ||
		!slices.Equal(d.Record.Summary.Presets, []string{PresetAll, PresetBanned}) {
		t.Fatalf("feed update of a banned offer: %+v", d)
	}
	r = d.Record
	del := &schemas.OfferCommand{Kind: schemas.CommandFeedDelete, OfferID: id, SellerID: "s", ExpectedVersion: -1, TaskID: 6}
	if d := Decide(r, cmd(del, 5)); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("delete by the task that touched it: %+v", d)
	}
	del.TaskID = 7
	if d := Decide(r, cmd(del, 6)); d.Outcome != schemas.OutcomeOK || d.Record.Offer.Status != schemas.OfferDeleted {
		t.Errorf("delete by a later task: %+v", d)
	}
}

func TestDecidePhotosAndModeration(t *testing.T) {
	id := IDFrom(12)
	r := Decide(nil, cmd(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", ExpectedVersion: -1, Offer: sample(), DraftID: "d"}, 1)).Record
	ph := cmd(&schemas.OfferCommand{Kind: schemas.CommandPhoto, OfferID: id, ExpectedVersion: -1,
		Photo: &schemas.PhotoResult{OfferID: id, SourceURL: "https://img/1", OK: true, URL: "https://avatars/1"}}, 2)
	d := Decide(r, ph)
	if d.Outcome != schemas.OutcomeOK || d.Record.Offer.Photos[0] != (schemas.Photo{SourceURL: "https://img/1", URL: "https://avatars/1", Status: schemas.PhotoReady}) {
		t.Fatalf("photo result: %+v", d)
	}
	if d := Decide(d.Record, ph); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("same photo result again: %+v", d)
	}
	ph.Command.Photo.SourceURL = "https://img/unknown"
	if d := Decide(r, ph); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("photo result for no photo: %+v", d)
	}
	ban := cmd(&schemas.OfferCommand{Kind: schemas.CommandModeration, OfferID: id, ExpectedVersion: -1,
		Opinion: &schemas.ModerationOpinion{OfferID: id, Banned: true, Reasons: []string{"fraud"}}}, 3)
	d = Decide(r, ban)
	if d.Outcome != schemas.OutcomeOK || !d.Record.Moderation.Banned || !slices.Equal(d.Record.Summary.Presets, []string{PresetAll, PresetBanned}) {
		t.Fatalf("ban: %+v", d)
	}
	lift := cmd(&schemas.OfferCommand{Kind: schemas.CommandModeration, OfferID: id, ExpectedVersion: -1,
		Opinion: &schemas.ModerationOpinion{OfferID: id}}, 4)
	if d := Decide(d.Record, lift); d.Outcome != schemas.OutcomeOK || d.Record.Moderation.Banned || len(d.Record.Moderation.Reasons) != 0 {
		t.Errorf("lift: %+v", d)
	}
	if d := Decide(nil, ban); d.Outcome != schemas.OutcomeIgnored {
		t.Errorf("opinion on no offer: %+v", d)
	}
	other := cmd(&schemas.OfferCommand{Kind: schemas.CommandModeration, OfferID: id, ExpectedVersion: -1,
		Opinion: &schemas.ModerationOpinion{OfferID: IDFrom(13), Banned: true}}, 5)
	if d := Decide(r, other); d.Outcome != schemas.OutcomeInvalid || d.Field != "opinion" {
		t.Errorf("opinion for another offer: %+v", d)
	}
}

// TestRememberKeepsTheLastAnswer: a value keeps its last command's answer
// alone (table.Remember says why one is enough), whatever the heat of the
// offer: its size does not grow with its writes.
func TestRememberKeepsTheLastAnswer(t *testing.T) {
	r := &schemas.OfferRecord{}
	for i := int64(0); i < 300; i++ {
		Remember(r, 1, i, Decision{Outcome: schemas.OutcomeOK, Version: i})
	}
	if rr, ok := Recall(r, 1, 299); !ok || rr.Version != 299 || len(r.Recent) != 1 {
		t.Fatalf("after 300 answers: %d remembered, the last %+v %v", len(r.Recent), rr, ok)
	}
	if _, ok := Recall(r, 1, 298); ok {
		t.Error("an answer before the last is kept")
	}
}

// TestAnAnswerThatWritesNothingIsRemembered: after a crash the table can
// be ahead of the input's last mark. A command answered CONFLICT, seen
// again, is answered as the first time: the CONFLICT was remembered in the
// record its batch wrote. (A later command of the offer is in a later
// batch, whose changelog carries this one's mark: once it is written, this
// command is never handled again; processors/offers/crash_test.go kills
// at that moment.)
func TestAnAnswerThatWritesNothingIsRemembered(t *testing.T) {
	id := IDFrom(77)
	r := Decide(nil, cmd(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s1", ExpectedVersion: -1,
		DraftID: "d", Offer: sample()}, 1)).Record
	early := &schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s1", ExpectedVersion: 2, Offer: sample()}
	first := Decide(r, cmd(early, 10)) // the offer is at version 1: CONFLICT
	if first.Outcome != schemas.OutcomeConflict || !unchanged(first, r) {
		t.Fatalf("first answer: %+v", first)
	}
	if rr, ok := Recall(first.Record, 0, 10); !ok || rr.Outcome != string(schemas.OutcomeConflict) {
		t.Fatalf("the CONFLICT of offset 10 is not remembered: %+v %v", rr, ok)
	}
}

// unchanged reports whether d writes nothing but its answer, remembered in
// a copy of cur (so that it is the answer again after a crash).
func unchanged(d Decision, cur *schemas.OfferRecord) bool {
	if d.Record == nil {
		return true
	}
	a, b := *d.Record, *cur
	a.Recent, b.Recent = nil, nil
	return d.StateOnly && reflect.DeepEqual(a, b) && len(d.Record.Recent) > 0
}

// TestExposureIsTheLogsTime follows an offer's exposure through its life by
// the time of the commands that changed it: the time it was ACTIVE and not
// banned, whatever its age (gost-scheduler.md: 180 days of exposure).
func TestExposureIsTheLogsTime(t *testing.T) {
	const day = 24 * time.Hour
	id := IDFrom(21)
	at := func(c *schemas.OfferCommand, off int64, when time.Duration) Input {
		in := cmd(c, off)
		in.At = t0.Add(when)
		return in
	}
	update := func(status schemas.OfferStatus) *schemas.OfferCommand {
		o := sample()
		o.Status = status
		o.ExposedMs, o.ExposedSince = 1, 1 // a client's values are not the offer's
		return &schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: "s", ExpectedVersion: -1, Offer: o}
	}
	check := func(what string, r *schemas.OfferRecord, ms time.Duration, since time.Duration, exposed bool) {
		t.Helper()
		wantSince := int64(0)
		if exposed {
			wantSince = t0.Add(since).UnixMilli()
		}
		if r.Offer.ExposedMs != ms.Milliseconds() || r.Offer.ExposedSince != wantSince {
			t.Errorf("%s: exposed %d ms since %d, want %d since %d", what, r.Offer.ExposedMs, r.Offer.ExposedSince, ms.Milliseconds(), wantSince)
		}
	}
	r := Decide(nil, at(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", ExpectedVersion: -1,
		Offer: sample(), DraftOwner: "user:s", DraftID: id}, 1, 0)).Record
	check("created", r, 0, 0, true)
	r = Decide(r, at(update(schemas.OfferInactive), 2, 10*day)).Record
	check("deactivated after 10 days", r, 10*day, 0, false)
	r = Decide(r, at(update(schemas.OfferActive), 3, 200*day)).Record
	check("reactivated at day 200", r, 10*day, 200*day, true)
	if ms, now := r.Offer.Exposure(t0.Add(230 * day).UnixMilli()); ms != (40*day).Milliseconds() || !now {
		t.Errorf("exposure at day 230: %d ms, exposed %v", ms, now)
	}
	// A ban pauses the exposure; lifting it resumes.
	r = Decide(r, at(&schemas.OfferCommand{Kind: schemas.CommandModeration, OfferID: id,
		Opinion: &schemas.ModerationOpinion{OfferID: id, Banned: true, Reasons: []string{"spam"}}}, 4, 205*day)).Record
	check("banned at day 205", r, 15*day, 0, false)
	r = Decide(r, at(&schemas.OfferCommand{Kind: schemas.CommandModeration, OfferID: id,
		Opinion: &schemas.ModerationOpinion{OfferID: id}}, 5, 300*day)).Record
	check("unbanned at day 300", r, 15*day, 300*day, true)
	// An update that keeps it ACTIVE changes nothing of its exposure.
	r = Decide(r, at(update(""), 6, 301*day)).Record
	check("edited", r, 15*day, 300*day, true)
	// A message timestamped before the exposure began adds nothing.
	r = Decide(r, at(update(schemas.OfferExpired), 7, 299*day)).Record
	check("expired by a message from the past", r, 15*day, 0, false)

	// A feed load keeps an EXPIRED offer expired (its exposure is spent),
	// and makes an INACTIVE one ACTIVE again.
	feed := &schemas.OfferCommand{Kind: schemas.CommandFeedUpsert, OfferID: id, SellerID: "s", ExpectedVersion: -1, Offer: sample(), TaskID: 1}
	if d := Decide(r, at(feed, 8, 302*day)); d.Record.Offer.Status != schemas.OfferExpired ||
		!slices.Equal(d.Record.Summary.Presets, []string{PresetAll, PresetExpired}) {
		t.Errorf("feed load of an expired offer: %s %v", d.Record.Offer.Status, d.Record.Summary.Presets)
	}
	r = Decide(r, at(update(schemas.OfferInactive), 9, 303*day)).Record
	if d := Decide(r, at(feed, 10, 304*day)); d.Record.Offer.Status != schemas.OfferActive {
		t.Errorf("feed load of an inactive offer: %s", d.Record.Offer.Status)
	} else {
		check("fed again", d.Record, 15*day, 304*day, true)
	}

	// A record written before exposure was kept counts from its creation.
	old := Decide(nil, at(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "s", ExpectedVersion: -1,
		Offer: sample(), DraftOwner: "user:s", DraftID: id}, 1, 0)).Record
	old.Offer.ExposedMs, old.Offer.ExposedSince = 0, schemas.ExposureUnknown
	old = Decide(old, at(update(schemas.OfferInactive), 2, 3*day)).Record
	check("a legacy offer deactivated", old, 3*day, 0, false)
}
