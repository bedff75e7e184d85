package offers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// InboxGroup is the consumer group that brings the photo service's answers
// and moderation's opinions into offers.commands.
const InboxGroup = "offers-inbox"

// RunInbox copies photos.results and moderation.opinions into
// offers.commands as PHOTO and MODERATION commands until ctx is done, so
// that the aggregate decides from one ordered input and a replay of it
// decides as the first run did. Undecodable records go to offers.dead.
// Offsets are committed once the copies are acknowledged by every replica:
// after a crash a record may be copied twice, which the aggregate ignores
// (the second finds its effect already there).
func RunInbox(ctx context.Context, brokers []string, log *slog.Logger) error {
	cl, err := streams.NewConsumer(brokers, InboxGroup, []string{topics.PhotosResults, topics.ModerationOpinions}, 200*time.Millisecond)
	if err != nil {
		return fmt.Errorf("offers inbox: %w", err)
	}
	defer func() { cl.AllowRebalance(); cl.Close() }()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			log.Warn("offers inbox: fetch failed", "topic", t, "partition", p, "err", err)
		})
		recs := fs.Records()
		out := make([]*kgo.Record, 0, len(recs))
		for _, r := range recs {
			c, err := inboxCommand(r)
			if err != nil {
				dl, derr := streams.DeadLetterRecord(topics.OffersDead, InboxGroup, r, err.Error())
				if derr != nil {
					return derr
				}
				out = append(out, dl)
				continue
			}
			data, err := schemas.OfferCommands.Encode(c)
			if err != nil {
				return fmt.Errorf("offers inbox: encode: %w", err)
			}
			out = append(out, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(c.OfferID), Value: data, Timestamp: r.Timestamp})
		}
		for len(out) > 0 {
			if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				log.Warn("offers inbox: copy failed, trying again", "err", err)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
				continue
			}
			break
		}
		if len(recs) > 0 {
			if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
				log.Warn("offers inbox: commit failed", "err", err)
			}
		}
		cl.AllowRebalance()
	}
}

// inboxCommand returns the command a photo result or opinion becomes.
func inboxCommand(r *kgo.Record) (*schemas.OfferCommand, error) {
	c := &schemas.OfferCommand{OfferID: string(r.Key), ExpectedVersion: -1}
	var id string
	switch r.Topic {
	case topics.PhotosResults:
		c.Kind, c.Photo = schemas.CommandPhoto, new(schemas.PhotoResult)
		if err := schemas.PhotoResults.Decode(r.Value, c.Photo); err != nil {
			return nil, fmt.Errorf("undecodable photo result: %w", err)
		}
		id = c.Photo.OfferID
	default:
		c.Kind, c.Opinion = schemas.CommandModeration, new(schemas.ModerationOpinion)
		if err := schemas.ModerationOpinions.Decode(r.Value, c.Opinion); err != nil {
			return nil, fmt.Errorf("undecodable opinion: %w", err)
		}
		id = c.Opinion.OfferID
	}
	if id != c.OfferID {
		return nil, fmt.Errorf("offer_id %q is not the message key %q", id, c.OfferID)
	}
	return c, nil
}
