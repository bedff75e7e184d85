package offerapi

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// Page is one page of a seller's preset: offers newest first, the token of
// the next page ("" at the end) and how many the preset holds.
type Page struct {
	Offers        []*OfferVersion `json:"offers"`
	NextPageToken string          `json:"next_page_token,omitempty"`
	Total         int64           `json:"total"`
}

// MaxPage is the largest page List returns.
const MaxPage = 200

// List returns a page of limit offers (at most MaxPage; 0 means 50) of the
// seller's preset after pageToken. It reads a range of cabinet.presets, so
// a page costs the same at the millionth offer as at the first.
func (s *Service) List(ctx context.Context, seller, preset, pageToken string, limit int) (*Page, error) {
	if fe := offers.ValidSeller(seller); fe != nil {
		return nil, &Error{Kind: Invalid, Field: fe.Field, Reason: fe.Reason}
	}
	if err := mayActFor(ctx, seller); err != nil {
		return nil, err
	}
	if preset == "" {
		preset = offers.PresetAll
	}
	if !slices.Contains(offers.Presets, preset) {
		return nil, errorf(Invalid, "preset", "want one of %s, got %q", strings.Join(offers.Presets, ", "), preset)
	}
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > MaxPage:
		return nil, errorf(Invalid, "limit", "want 1 to %d, got %d", MaxPage, limit)
	}
	prefix := offers.PresetPrefix(seller, preset)
	start := prefix
	if pageToken != "" {
		after, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err != nil || !strings.HasPrefix(string(after), prefix) {
			return nil, errorf(Invalid, "page_token", "not a token of this list")
		}
		start = string(after) + "\x00"
	}
	// '0' is the byte after '/': the range holds exactly the preset's keys.
	it, err := s.cfg.PresetsView.IteratorWithRange(start, prefix[:len(prefix)-1]+"0")
	if err != nil {
		return nil, &Error{Kind: Unavailable, Reason: err.Error()}
	}
	defer it.Release()
	page := &Page{Offers: []*OfferVersion{}}
	var ids []string
	last := ""
	for it.Next() {
		if len(ids) == limit {
			page.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(last))
			break
		}
		key := it.Key()
		ids = append(ids, key[strings.LastIndexByte(key, '/')+1:])
		last = key
	}
	// The page's records in one read (one request per shard through the
	// cache); an offer deleted since the list was written is left out.
	records, err := s.cfg.Records.Records(ctx, ids)
	if err != nil {
		return nil, &Error{Kind: Unavailable, Reason: err.Error()}
	}
	for _, id := range ids {
		if r := records[id]; r != nil && r.Offer.Status != schemas.OfferDeleted {
			page.Offers = append(page.Offers, versionOf(r))
		}
	}
	if c, err := s.counters(seller); err == nil {
		page.Total = c.Presets.Get(preset)
	}
	return page, nil
}

// Counters returns the seller's preset counts and counters.
func (s *Service) Counters(ctx context.Context, seller string) (*schemas.SellerCabinet, error) {
	if fe := offers.ValidSeller(seller); fe != nil {
		return nil, &Error{Kind: Invalid, Field: fe.Field, Reason: fe.Reason}
	}
	if err := mayActFor(ctx, seller); err != nil {
		return nil, err
	}
	return s.counters(seller)
}

// counters sums the parts of the seller's cabinet (cabinet.Keys).
func (s *Service) counters(seller string) (*schemas.SellerCabinet, error) {
	keys := cabinet.Keys(seller)
	parts := make([]*schemas.SellerCabinet, 0, len(keys))
	for _, k := range keys {
		v, err := s.cfg.CabinetView.Get(k)
		if err != nil {
			return nil, &Error{Kind: Unavailable, Reason: err.Error()}
		}
		if c, ok := v.(*schemas.SellerCabinet); ok {
			parts = append(parts, c)
		}
	}
	return cabinet.Sum(seller, parts...), nil
}

// FeedSource calls fn with every item of an upload, in order, and returns
// fn's first error, or its own (an item it could not read). It can be
// called more than once, each time from the first item.
type FeedSource func(fn func(*schemas.FeedItem) error) error

// feedBatch is how many items are appended at once.
const feedBatch = 1000

// FeedItems appends a task's items to feeds.ingest for the loader, in
// order, and returns how many. items is read twice, so that an upload of
// any size takes memory for one batch only: first to check every item
// (nothing is appended if one is bad), then to append them in batches.
func (s *Service) FeedItems(ctx context.Context, seller string, task int64, items FeedSource) (int, error) {
	if err := feedTarget(ctx, seller, task); err != nil {
		return 0, err
	}
	appended := 0
	done := s.uploads.begin(feeds.StatusKey(seller, task))
	defer func() { done(appended) }()
	n := 0
	err := items(func(it *schemas.FeedItem) error {
		n++
		return checkFeedItem(seller, task, n, it)
	})
	if err != nil {
		return 0, err
	}
	recs := make([]*kgo.Record, 0, feedBatch)
	flush := func() error {
		if err := s.cfg.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return &Error{Kind: Unavailable, Reason: err.Error()}
		}
		recs = recs[:0]
		return nil
	}
	i := 0
	err = items(func(it *schemas.FeedItem) error {
		i++
		if err := checkFeedItem(seller, task, i, it); err != nil {
			return err // the source changed between the reads
		}
		data, err := schemas.FeedItems.Encode(it)
		if err != nil {
			return errorf(Invalid, "offer", "item %d: %v", i, err)
		}
		recs = append(recs, &kgo.Record{Topic: topics.FeedsIngest, Key: []byte(seller), Value: data})
		if len(recs) == feedBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		appended = n
	}
	return n, err
}

// checkFeedItem checks item n of seller's task, and stamps it with both.
func checkFeedItem(seller string, task int64, n int, it *schemas.FeedItem) error {
	it.SellerID, it.TaskID, it.End = seller, task, false
	if it.ExternalID == "" {
		return errorf(Invalid, "external_id", "item %d: required", n)
	}
	if err := schemas.CheckKey(it.ExternalID); err != nil {
		return errorf(Invalid, "external_id", "item %d: %v", n, err)
	}
	if it.Offer == nil {
		return errorf(Invalid, "offer", "item %d: required", n)
	}
	o := *it.Offer
	o.SellerID, o.ExternalID = seller, it.ExternalID
	if fe := offers.Validate(&o); fe != nil {
		return errorf(Invalid, fe.Field, "item %d: %s", n, fe.Reason)
	}
	return nil
}

// FeedEnd is how a task's upload ended, as its uploader tells.
type FeedEnd struct {
	// Failed says the upload failed: the task ends, nothing is removed.
	Failed bool `json:"failed"`
	// Items is how many distinct external ids the task uploaded (0: not
	// told): offers are removed only if the loader sees every one of them
	// loaded by the task.
	Items int64 `json:"items"`
}

// FinishFeed appends the end marker of a task: once the loader reaches it,
// every offer of the seller's feed the task did not touch is deleted, unless
// the upload failed or is partial (end), which removes nothing.
func (s *Service) FinishFeed(ctx context.Context, seller string, task int64, end FeedEnd) error {
	if err := feedTarget(ctx, seller, task); err != nil {
		return err
	}
	if end.Items < 0 {
		return errorf(Invalid, "items", "want the number of items uploaded (0: not told), got %d", end.Items)
	}
	data, err := schemas.FeedItems.Encode(&schemas.FeedItem{SellerID: seller, TaskID: task, End: true, Failed: end.Failed, Items: end.Items})
	if err != nil {
		return err
	}
	if err := s.cfg.Producer.ProduceSync(ctx, &kgo.Record{Topic: topics.FeedsIngest, Key: []byte(seller), Value: data}).FirstErr(); err != nil {
		return &Error{Kind: Unavailable, Reason: err.Error()}
	}
	return nil
}

func feedTarget(ctx context.Context, seller string, task int64) error {
	if fe := offers.ValidSeller(seller); fe != nil {
		return &Error{Kind: Invalid, Field: fe.Field, Reason: fe.Reason}
	}
	if err := mayActFor(ctx, seller); err != nil {
		return err
	}
	if task <= 0 {
		return errorf(Invalid, "task_id", "want a positive task id, got %d", task)
	}
	return nil
}
