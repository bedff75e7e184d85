package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// runFeeds answers "feeds status [--seller S] TASK": the statuses of feed
// task TASK (of every seller that has one, or of S) as the loader last
// wrote them on feeds.status, one JSON line each.
func runFeeds(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		return fmt.Errorf("%w: want status", errUsage)
	}
	f := newFlags("feeds status", stderr)
	brokers := f.brokers()
	seller := f.String("seller", "", "the seller whose task it is (default: every seller with a task of that id)")
	timeout := f.Duration("timeout", defaultTimeout, "how long to wait for the brokers")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one TASK id", errUsage)
	}
	task, err := strconv.ParseInt(f.Arg(0), 10, 64)
	if err != nil || task <= 0 {
		return fmt.Errorf("%w: task %q: want a positive integer", errUsage, f.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	last := map[string]*schemas.FeedStatus{}
	err = streams.ReadToEnd(ctx, kafka, string(topics.FeedsStatus), func(r *kgo.Record) {
		var st schemas.FeedStatus
		if r.Value == nil || schemas.FeedStatuses.Decode(r.Value, &st) != nil {
			delete(last, string(r.Key))
			return
		}
		if st.TaskID == task && (*seller == "" || st.SellerID == *seller) {
			last[string(r.Key)] = &st
		}
	})
	if err != nil {
		return fmt.Errorf("read %s on %v: %w", topics.FeedsStatus, *brokers, err)
	}
	if len(last) == 0 {
		return errors.New("no status of task " + string(f.Arg(0)+string(" on "+topics.FeedsStatus)) +
			": the loader has not reached it (queued: the API that took the upload tells) or there is no such task")
	}
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	enc := json.NewEncoder(stdout)
	for _, k := range keys {
		if err := enc.Encode(last[k]); err != nil {
			return err
		}
	}
	return nil
}
