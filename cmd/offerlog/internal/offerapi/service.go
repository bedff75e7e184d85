// Package offerapi is the offer API of the offer storage: the operations on
// drafts, offers, the seller cabinet and feeds that the HTTP/JSON routes
// (internal/api) and the gRPC OfferService (schemas/proto/offerv1) serve.
// Writes are commands on topics answered by their group (request/reply);
// reads come from views of the groups' tables.
package offerapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Kind classifies the errors of the service.
type Kind int

// Kinds of errors, each with its HTTP status and gRPC code.
const (
	Invalid     Kind = iota + 1 // 422 / INVALID_ARGUMENT
	NotFound                    // 404 / NOT_FOUND
	Conflict                    // 409 / FAILED_PRECONDITION
	Unavailable                 // 503 / UNAVAILABLE
	Timeout                     // 504 / DEADLINE_EXCEEDED
	Forbidden                   // 403 / PERMISSION_DENIED
)

// Error is an answer other than success: its kind, the field at fault if
// one is, and the offer's current version for a conflict.
type Error struct {
	Kind    Kind
	Field   string
	Reason  string
	Version int64
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Reason
	}
	return e.Reason
}

func isKind(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

func errorf(k Kind, field, format string, args ...any) *Error {
	return &Error{Kind: k, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// checkID answers an id a client names: malformed as any key (over 1 KiB,
// not UTF-8, a control character) is the caller's mistake, Invalid naming
// field; well formed but no id offerlog gives, nothing it could find.
func checkID(id, field, what string) *Error {
	if err := schemas.CheckKey(id); err != nil {
		return errorf(Invalid, field, "%v", err)
	}
	if !offers.ValidID(id) {
		return errorf(NotFound, field, "%q is not %s", id, what)
	}
	return nil
}

// actAs returns the seller a call acts for, by the caller's scope
// (auth.FromContext): a seller token acts for its own seller, whatever the
// call names (naming another is Forbidden, never believed); an admin for
// the seller named. Any other caller is Forbidden.
func actAs(ctx context.Context, named string) (string, error) {
	sc := auth.FromContext(ctx)
	switch {
	case sc.Kind == auth.Admin:
		return named, nil
	case sc.Kind == auth.Seller && (named == "" || named == sc.Subject):
		return sc.Subject, nil
	}
	return "", &Error{Kind: Forbidden, Reason: auth.Forbidden(sc, auth.Seller, named).Error()}
}

// mayActFor returns nil if the caller may read or write what belongs to seller.
func mayActFor(ctx context.Context, seller string) error {
	if err := auth.FromContext(ctx).Check(auth.Seller, seller); err != nil {
		return &Error{Kind: Forbidden, Reason: err.Error()}
	}
	return nil
}

// Config of the service.
type Config struct {
	// Producer appends commands and feed items (acks=all); not closed.
	Producer *kgo.Client
	// Offers sends commands to the offer aggregate.
	Offers *offers.Client
	// IDs hands out the ids of new drafts (a published draft's offer has
	// its draft's id).
	IDs *offers.IDs
	// Drafts matches the drafts group's answers.
	Drafts *streams.Replies[schemas.DraftResult]
	// Records reads the aggregate's table: a view of it (ViewRecords) or
	// the serving cache (CacheRecords), and the archive for the offers
	// the table no longer holds (WithArchive).
	Records Records
	// Views of the other tables read: the drafts', the cabinet's and
	// cabinet.presets.
	DraftsView, CabinetView, PresetsView *table.View
	// StatusView is a view of feeds.status; nil answers feed statuses
	// from what this process took only.
	StatusView *table.View
	// Timeout bounds the wait for an answer and for a view to show a write.
	Timeout time.Duration
	// Hops, if set, observes the wait for the view to show a write (path
	// "offer", hop "view"; metrics.Registry.WriteHops).
	Hops   *metrics.HistogramVec
	Logger *slog.Logger
}

// Service is the offer API. Safe for concurrent use.
type Service struct {
	cfg     Config
	uploads uploads
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Producer == nil || cfg.Offers == nil || cfg.IDs == nil || cfg.Drafts == nil ||
		cfg.Records == nil || cfg.DraftsView == nil || cfg.CabinetView == nil || cfg.PresetsView == nil {
		return nil, errors.New("offerapi: producer, offers client, ids, drafts replies, records and the three views are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}, nil
}

// OfferVersion is an offer as read: its content, version and ban.
type OfferVersion struct {
	Offer      schemas.Offer `json:"offer"`
	Version    int64         `json:"version"`
	Banned     bool          `json:"banned"`
	BanReasons []string      `json:"ban_reasons,omitempty"`
	// Archived marks an offer deleted, sold or expired longer than the
	// aggregate's archive time: read from offers.archive, read-only.
	Archived bool `json:"archived,omitempty"`
}

func versionOf(r *schemas.OfferRecord) *OfferVersion {
	return &OfferVersion{Offer: r.Offer, Version: r.Version, Banned: r.Moderation.Banned, BanReasons: r.Moderation.Reasons,
		Archived: r.Archived}
}

func outcomeErr(r schemas.OfferResult) error {
	switch r.Outcome {
	case schemas.OutcomeOK:
		return nil
	case schemas.OutcomeConflict:
		return &Error{Kind: Conflict, Field: r.Field, Reason: r.Reason, Version: r.Version}
	case schemas.OutcomeNotFound, schemas.OutcomeIgnored:
		return &Error{Kind: NotFound, Field: r.Field, Reason: r.Reason}
	case schemas.OutcomeInvalid:
		return &Error{Kind: Invalid, Field: r.Field, Reason: r.Reason}
	}
	return &Error{Kind: Conflict, Field: r.Field, Reason: r.Reason}
}

func answerErr(err error) error {
	if errors.Is(err, streams.ErrBusy) {
		return &Error{Kind: Unavailable, Reason: "the write is logged and will be decided, but too many writes wait for answers here to wait for it: " + err.Error()}
	}
	if errors.Is(err, offers.ErrNoAnswer) || errors.Is(err, streams.ErrNoReply) {
		return &Error{Kind: Timeout, Reason: "no answer in time; the write is logged and will be decided: " + err.Error()}
	}
	return &Error{Kind: Unavailable, Reason: err.Error()}
}

// Offer returns offer id as the aggregate's table holds it. With
// minVersion > 0 (read-your-writes: the version a write answered) it waits
// up to the timeout for the table's copy to show that version or a later
// one, and answers Timeout if it does not.
//
// An offer the caller may not read answers NotFound, as a free id does
// (an admin reads any): which ids exist is not told to those who do not
// own them (the seed wants ids that cannot be enumerated; a 403 for another
// seller's id and a 404 for a free one told it).
func (s *Service) Offer(ctx context.Context, id string, minVersion int64) (*OfferVersion, error) {
	r, err := s.record(ctx, id)
	if err == nil && mayActFor(ctx, r.Offer.SellerID) != nil {
		return nil, errorf(NotFound, "id", "no offer %s", id)
	}
	if err == nil && minVersion > 0 && r.Version < minVersion {
		r, err = s.awaitRecord(ctx, id, minVersion)
	}
	if err != nil {
		return nil, err
	}
	return versionOf(r), nil
}

// StageStatus is where an offer stands with one stage of the scheduler.
type StageStatus struct {
	Stage string `json:"stage"`
	// Queued: the offer is in the stage's queue, waiting or being worked
	// on (the record cannot tell which: queued until the stage's result).
	Queued bool `json:"queued"`
	// Again: an outside change the stage wants came while it was queued;
	// its result queues the offer once more.
	Again bool `json:"again,omitempty"`
	// Waiting: an exclusive stage that waits for another to release the
	// offer.
	Waiting bool `json:"waiting,omitempty"`
	// TimerAt is the stage's pending timer, if it has one.
	TimerAt *time.Time `json:"timer_at,omitempty"`
	// StateVersion and StateType are the stage's private state's version
	// (what a compare-and-set names) and type; its bytes are the stage's.
	StateVersion int64  `json:"state_version"`
	StateType    string `json:"state_type,omitempty"`
}

// OfferStages is an offer's standing with every stage that has a part of
// it, by stage name.
type OfferStages struct {
	ID      string        `json:"id"`
	Version int64         `json:"version"`
	Stages  []StageStatus `json:"stages"`
}

// Stages returns where offer id stands with the scheduler's stages: the
// queues that hold it and its pending timers. It answers as Offer does
// (NotFound for an offer the caller may not read).
func (s *Service) Stages(ctx context.Context, id string) (*OfferStages, error) {
	r, err := s.record(ctx, id)
	if err == nil && mayActFor(ctx, r.Offer.SellerID) != nil {
		return nil, errorf(NotFound, "id", "no offer %s", id)
	}
	if err != nil {
		return nil, err
	}
	out := &OfferStages{ID: id, Version: r.Version, Stages: []StageStatus{}}
	for _, st := range r.Stages {
		ss := StageStatus{Stage: st.Stage, Queued: st.Queued, Again: st.Again, Waiting: st.Waiting, StateVersion: st.Version, StateType: st.TypeURL}
		if st.TimerAt != 0 {
			at := time.UnixMilli(st.TimerAt).UTC()
			ss.TimerAt = &at
		}
		out.Stages = append(out.Stages, ss)
	}
	return out, nil
}

// record returns the aggregate's record of a live offer id.
func (s *Service) record(ctx context.Context, id string) (*schemas.OfferRecord, error) {
	if e := checkID(id, "id", "an offer id"); e != nil {
		return nil, e
	}
	r, err := recordOf(ctx, s.cfg.Records, id)
	if err != nil {
		return nil, &Error{Kind: Unavailable, Reason: err.Error()}
	}
	if r == nil || r.Offer.Status == schemas.OfferDeleted {
		return nil, errorf(NotFound, "id", "no offer %s", id)
	}
	return r, nil
}

// awaitRecord waits up to the timeout for the record of a live offer id at
// version or later.
func (s *Service) awaitRecord(ctx context.Context, id string, version int64) (*schemas.OfferRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var r *schemas.OfferRecord
	var err error
	if !poll(ctx, s.changed(), func() bool {
		r, err = s.record(ctx, id)
		if err == nil && r.Version >= version {
			return true
		}
		// A failure other than the offer not being there yet ends the
		// wait, unless it is the wait's own end.
		return err != nil && ctx.Err() == nil && !isKind(err, NotFound)
	}) {
		return nil, errorf(Timeout, "min_version", "offer %s is not at version %d here yet", id, version)
	}
	return r, err
}

// poll calls try at once, and again whenever changed's channel is closed
// (the records moved on; nil: never) and at least every 5 ms, until it
// reports done or ctx ends; it reports whether try did. A write's answer
// comes once its batch committed, a moment before the view reads the
// batch: waking on the view's move rather than the next tick saved 4 ms
// a write (docs/BENCHMARKS.md, 2026-12-03).
func poll(ctx context.Context, changed func() <-chan struct{}, try func() bool) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		var moved <-chan struct{}
		if changed != nil {
			moved = changed() // before try: a move during it wakes the wait
		}
		if try() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-moved:
		case <-t.C:
		}
	}
}

// changed returns the Records' change signal, nil if they have none.
func (s *Service) changed() func() <-chan struct{} {
	if c, ok := s.cfg.Records.(changer); ok {
		return c.Changed
	}
	return nil
}

// await returns offer id once the table's copy shows version or later;
// after the timeout it returns what the write told (id and version)
// without content.
func (s *Service) await(ctx context.Context, id string, version int64) *OfferVersion {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	start := time.Now()
	var shown *OfferVersion
	if !poll(ctx, s.changed(), func() bool {
		r, err := recordOf(ctx, s.cfg.Records, id)
		if err != nil || r == nil || r.Version < version {
			return false
		}
		shown = versionOf(r)
		return true
	}) {
		return &OfferVersion{Offer: schemas.Offer{ID: id}, Version: version}
	}
	if s.cfg.Hops != nil {
		s.cfg.Hops.With("offer", "view").Observe(time.Since(start).Seconds())
	}
	return shown
}

// Update replaces the content of offer id of seller if it is at expected
// (any version when expected is negative).
func (s *Service) Update(ctx context.Context, seller, id string, expected int64, o *schemas.Offer) (*OfferVersion, error) {
	if e := checkID(id, "id", "an offer id"); e != nil {
		return nil, e
	}
	seller, err := actAs(ctx, seller)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errorf(Invalid, "offer", "required")
	}
	c := *o
	c.SellerID = seller
	if fe := offers.Validate(&c); fe != nil {
		return nil, &Error{Kind: Invalid, Field: fe.Field, Reason: fe.Reason}
	}
	res, err := s.cfg.Offers.Do(ctx, &schemas.OfferCommand{Kind: schemas.CommandUpdate, OfferID: id, SellerID: seller,
		ExpectedVersion: expected, Offer: &c})
	if err != nil {
		return nil, answerErr(err)
	}
	if err := outcomeErr(res); err != nil {
		return nil, err
	}
	return s.await(ctx, id, res.Version), nil
}

// Delete deletes offer id of seller if it is at expected (any version when
// negative) and returns its last version.
func (s *Service) Delete(ctx context.Context, seller, id string, expected int64) (int64, error) {
	if e := checkID(id, "id", "an offer id"); e != nil {
		return 0, e
	}
	seller, err := actAs(ctx, seller)
	if err != nil {
		return 0, err
	}
	if fe := offers.ValidSeller(seller); fe != nil {
		return 0, &Error{Kind: Invalid, Field: fe.Field, Reason: fe.Reason}
	}
	res, err := s.cfg.Offers.Do(ctx, &schemas.OfferCommand{Kind: schemas.CommandDelete, OfferID: id, SellerID: seller,
		ExpectedVersion: expected})
	if err != nil {
		return 0, answerErr(err)
	}
	if err := outcomeErr(res); err != nil {
		return 0, err
	}
	s.await(ctx, id, res.Version)
	return res.Version, nil
}

// draftCommand sends c keyed for its owner and returns the group's answer.
func (s *Service) draftCommand(ctx context.Context, c *schemas.DraftCommand) (*schemas.Draft, error) {
	for _, id := range []string{c.Anon, c.User} {
		if id != "" && offers.ValidSeller(id) != nil {
			return nil, errorf(Invalid, "owner", "owner id %q: want 1-64 characters of A-Z, a-z, 0-9, '_', '.' or '-'", id)
		}
	}
	if c.Anon == "" && c.User == "" {
		return nil, errorf(Invalid, "owner", "give anon, user or both")
	}
	data, err := schemas.DraftCommands.Encode(c)
	if err != nil {
		return nil, fmt.Errorf("offerapi: encode draft command: %w", err)
	}
	rec := &kgo.Record{Topic: topics.DraftsCommands, Key: []byte(drafts.Key(c)), Value: data}
	if err := s.cfg.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, &Error{Kind: Unavailable, Reason: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	res, err := s.cfg.Drafts.Wait(ctx, streams.RequestID{Partition: rec.Partition, Offset: rec.Offset})
	if err != nil {
		return nil, answerErr(err)
	}
	switch res.Outcome {
	case schemas.OutcomeOK:
		return res.Draft, nil
	case schemas.OutcomeConflict:
		return nil, &Error{Kind: Conflict, Field: "draft_id", Reason: res.Reason}
	case schemas.OutcomeNotFound, schemas.OutcomeIgnored:
		return nil, &Error{Kind: NotFound, Field: "draft_id", Reason: res.Reason}
	}
	return nil, &Error{Kind: Invalid, Reason: res.Reason}
}

// CurrentDraft returns the visitor's draft (anonymous id, logged-in id, or
// both) for category (optional), by the seed's rules.
func (s *Service) CurrentDraft(ctx context.Context, anon, user, category string) (*schemas.Draft, error) {
	user, err := actAs(ctx, user)
	if err != nil {
		return nil, err
	}
	id, err := s.cfg.IDs.New(ctx)
	if err != nil {
		return nil, errorf(Unavailable, "", "no offer id to give: %v", err)
	}
	c := &schemas.DraftCommand{Kind: schemas.DraftCurrent, Anon: anon, User: user, Category: category, NewID: id}
	// An id the answers show unused (the visitor had a draft) is given
	// back: asking for a draft one has costs no id of the space.
	unused := func(ds ...*schemas.Draft) {
		for _, d := range ds {
			if d == nil || d.ID == id {
				return
			}
		}
		s.cfg.IDs.Unused(id)
	}
	if anon == "" || user == "" {
		d, err := s.draftCommand(ctx, c)
		if err == nil {
			unused(d)
		}
		return d, err
	}
	// Both: read the anonymous draft, hand it to the user, drop it.
	taken, err := s.draftCommand(ctx, c)
	if err != nil {
		return nil, err
	}
	c.Kind, c.Draft = schemas.DraftHand, taken
	d, err := s.draftCommand(ctx, c)
	if err == nil && taken != nil {
		unused(taken, d)
	}
	if err != nil || taken == nil {
		return d, err
	}
	if _, err := s.draftCommand(ctx, &schemas.DraftCommand{Kind: schemas.DraftDiscard, Anon: anon, ExpectedID: taken.ID}); err != nil && !isKind(err, NotFound) {
		s.cfg.Logger.Warn("offerapi: handed anonymous draft not dropped", "anon", anon, "draft", taken.ID, "err", err)
	}
	return d, nil
}

// SaveDraft replaces the content of the owner's draft id (the owner is the
// user if given, else the anonymous visitor).
func (s *Service) SaveDraft(ctx context.Context, anon, user, id string, o *schemas.Offer) (*schemas.Draft, error) {
	user, err := actAs(ctx, user)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errorf(Invalid, "offer", "required")
	}
	c := &schemas.DraftCommand{Kind: schemas.DraftSave, User: user, Draft: &schemas.Draft{ID: id, Offer: *o}}
	if user == "" {
		c.Anon = anon
	}
	return s.draftCommand(ctx, c)
}

// PublishDraft makes an offer of the logged-in seller's draft id. It is one
// command, PUBLISH, to the drafts group, which retires the draft and emits
// the offer's CREATE in one write of its table; the offer's id is a function
// of the draft (its own id, or the next of its chain, offers.NextID, when
// another offer holds it), so a retry, even after a crash, gets the same
// offer. version, if positive, is the draft version the seller saw; the
// drafts group handles the PUBLISH after every earlier write of the draft
// (each was in drafts.commands, the draft's partition, before its answer),
// so nothing waits for the drafts view: a missing draft is answered 404 at
// once by the group, not 504 after a wait for a version that never comes.
func (s *Service) PublishDraft(ctx context.Context, user, id string, _ int64) (*OfferVersion, error) {
	user, err := actAs(ctx, user)
	if err != nil {
		return nil, err
	}
	if user == "" {
		return nil, errorf(Invalid, "user", "log in to publish")
	}
	if fe := offers.ValidSeller(user); fe != nil {
		return nil, &Error{Kind: Invalid, Field: "user", Reason: fe.Reason}
	}
	if e := checkID(id, "draft_id", "a draft id"); e != nil {
		return nil, e
	}
	owner := drafts.UserKey(user)
	_, err = s.draftCommand(ctx, &schemas.DraftCommand{Kind: schemas.DraftPublish, User: user, ExpectedID: id})
	var e *Error
	switch {
	case errors.As(err, &e) && e.Kind == NotFound:
		// Published before, and the seller has another draft since: the
		// offer is where the draft's chain leads.
		if o, ok := s.offerOf(ctx, owner, id); ok {
			return o, nil
		}
		return nil, err
	case errors.As(err, &e) && e.Kind == Invalid && e.Field == "":
		// The group answers "field: reason".
		e.Field, e.Reason, _ = strings.Cut(e.Reason, ": ")
		return nil, e
	case err != nil:
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var o *OfferVersion
	if !poll(ctx, s.changed(), func() bool {
		var ok bool
		o, ok = s.offerOf(ctx, owner, id)
		return ok
	}) {
		return nil, errorf(Timeout, "draft_id", "draft %s is published; its offer is not in the view yet", id)
	}
	return o, nil
}

// offerOf returns the offer published from owner's draft id, as the view
// shows it: following the draft's chain of ids from the draft's own.
func (s *Service) offerOf(ctx context.Context, owner, id string) (*OfferVersion, bool) {
	at := id
	for range offers.MaxHops {
		r, err := recordOf(ctx, s.cfg.Records, at)
		switch {
		case err != nil || r == nil:
			return nil, false
		case r.DraftOwner == owner && r.DraftID == id:
			return versionOf(r), true
		}
		at = offers.NextID(owner, id, at)
	}
	return nil, false
}
