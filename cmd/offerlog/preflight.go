package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/offerlog/offerlog/streams"
)

// defaultTimeout bounds how long a command waits to reach the brokers.
const defaultTimeout = 10 * time.Second

// checkTopic makes sure, within timeout, that the brokers answer and that
// topic exists: a command against a broker that is down, or a topic that
// is not there, fails at once with a message naming it instead of waiting
// silently for ever.
func checkTopic(ctx context.Context, kafka *streams.Cluster, topic string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	brokers := kafka.Brokers()
	listed, err := kafka.Admin().ListTopics(ctx, topic)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("no broker of %s answered within %s: %w", strings.Join(brokers, ","), timeout, err)
	case err != nil:
		return fmt.Errorf("cannot reach the brokers %s: %w", strings.Join(brokers, ","), err)
	case !listed.Has(topic):
		return fmt.Errorf("topic %q does not exist on %s: offerlog topics ensure creates the catalogue (offerlog topics list shows it)", topic, strings.Join(brokers, ","))
	}
	if d := listed[topic]; d.Err != nil {
		return fmt.Errorf("topic %q on %s: %w", topic, strings.Join(brokers, ","), d.Err)
	}
	return nil
}
