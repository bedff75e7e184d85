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
func RunInbox(ctx context.Context, c *streams.Cluster, log *slog.Logger) error {
	prod, err := c.Producer(InboxGroup)
	if err != nil {
		return fmt.Errorf("offers inbox: %w", err)
	}
	defer prod.Close()
	return streams.RunLoop(ctx, streams.LoopConfig{Cluster: c, Group: InboxGroup,
		Topics: []string{topics.PhotosResults, topics.ModerationOpinions}, DeadTopic: topics.OffersDead,
		Backoff: streams.Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second}, Logger: log,
		Handler: func(ctx context.Context, r *kgo.Record) error {
			c, err := inboxCommand(r)
			if err != nil {
				return streams.Permanent(err)
			}
			data, err := schemas.OfferCommands.Encode(c)
			if err != nil {
				return streams.Permanent(fmt.Errorf("encode: %w", err))
			}
			return prod.ProduceSync(ctx, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(c.OfferID), Value: data, Timestamp: r.Timestamp}).FirstErr()
		}})
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
