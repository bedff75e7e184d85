package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

func runTopics(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "ensure" && args[0] != "list" && args[0] != "wait") {
		return fmt.Errorf("%w: want ensure, list or wait", errUsage)
	}
	verb := args[0]
	f := newFlags("topics "+verb, stderr)
	f.brokers()
	partitions := f.Int("partitions", 8, "partitions of the partitioned topics")
	replication := f.Int("replication", -1, "replication factor of created topics (-1: the broker's default)")
	inputRetention := f.Duration("input-retention", 0, inputRetentionUsage)
	timeout := f.Duration("timeout", 10*time.Minute, "wait: how long to wait for the catalogue to be there")
	of := f.String("component", "", "wait: for the topics this component uses only (those its Kafka user may see)")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if *of != "" && !slices.Contains(platform.AllComponents(), *of) {
		return fmt.Errorf("%w: --component %q: one of %v", errUsage, *of, platform.AllComponents())
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	cl, err := kafka.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	catalogue, others, err := withClientTopics(ctx, adm, int32(*partitions))
	if err != nil {
		return err
	}
	catalogue = topics.WithInputRetention(catalogue, *inputRetention)
	if verb == "wait" {
		if *of != "" {
			specs := platform.UserSpecs(*of)
			catalogue = slices.DeleteFunc(catalogue, func(t topics.Topic) bool { return !component.Uses(specs, t.Name) })
		}
		return waitTopics(ctx, adm, catalogue, *timeout, stdout)
	}
	if verb == "ensure" {
		return ensureCatalogue(ctx, adm, int16(*replication), catalogue, stdout)
	}
	statuses, err := topics.List(ctx, adm, append(catalogue, others...))
	if err != nil {
		return err
	}
	var names []string
	for _, st := range statuses {
		if st.Exists {
			names = append(names, st.Name)
		}
	}
	ends := map[string]int64{}
	if len(names) > 0 {
		listed, err := adm.ListEndOffsets(ctx, names...)
		if err != nil {
			return fmt.Errorf("end offsets: %w", err)
		}
		listed.Each(func(o kadm.ListedOffset) { ends[o.Topic] += o.Offset })
	}
	extra := map[string]bool{}
	for _, t := range others {
		extra[t.Name] = true
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tCLEANUP\tRETENTION.MS\tEND OFFSETS\tSCHEMA\tSTATUS")
	problems := 0
	for _, st := range statuses {
		status := "ok"
		switch {
		case extra[st.Name]:
			status = "not in the catalogue"
		case !st.Exists:
			status, problems = "missing", problems+1
		case len(st.Problems) > 0:
			status, problems = strings.Join(st.Problems, "; "), problems+1
		}
		cleanup := st.ActualConfigs["cleanup.policy"]
		if cleanup == "" && st.Exists {
			cleanup = "delete"
		}
		retention := st.ActualConfigs["retention.ms"]
		if retention == "" && st.Exists {
			retention = "(broker default)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\n", st.Name, st.ActualPartitions, cleanup, retention, ends[st.Name], st.Schema, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if problems > 0 {
		return fmt.Errorf("%d topic(s) missing or different from the catalogue (run: offerlog topics ensure)", problems)
	}
	return nil
}

// ensureCatalogue creates what the catalogue lacks and says what it
// created (offerlog topics ensure, offerlog deploy init).
func ensureCatalogue(ctx context.Context, adm *kadm.Client, replication int16, catalogue []topics.Topic, stdout io.Writer) error {
	created, err := topics.Ensure(ctx, adm, replication, catalogue)
	for _, t := range created {
		fmt.Fprintf(stdout, "created %s\n", t)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d topics ok\n", len(catalogue))
	return nil
}

// withClientTopics returns the catalogue plus the feed topics of every
// client and the queues and push topics of every stage that has some on
// the cluster; and, apart, every other topic there (with its own
// partitions: nothing to compare it with).
func withClientTopics(ctx context.Context, adm *kadm.Client, partitions int32) (catalogue, others []topics.Topic, err error) {
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list topics: %w", err)
	}
	clients := map[string]bool{}
	stages, pushing := map[string]bool{}, map[string]bool{}
	for _, name := range all.Names() {
		for _, prefix := range []string{topics.SaasPrefix, topics.YtPrefix} {
			if c, ok := strings.CutPrefix(name, prefix); ok && topics.ValidateClient(c) == nil {
				clients[c] = true
			}
		}
		if s, ok := strings.CutPrefix(name, topics.QueuePrefix); ok {
			stages[strings.TrimSuffix(s, ".low")] = true
		}
		if s, ok := strings.CutPrefix(name, topics.PushPrefix); ok {
			pushing[s] = true
		}
	}
	names := make([]string, 0, len(clients))
	for c := range clients {
		names = append(names, c)
	}
	sort.Strings(names)
	out := topics.Catalogue(partitions)
	for _, c := range names {
		out = append(out, topics.ForClient(c, partitions)...)
	}
	out = append(out, topics.ForStages(sortedKeys(stages), sortedKeys(pushing), partitions)...)
	known := map[string]bool{}
	for _, t := range out {
		known[t.Name] = true
	}
	for _, name := range all.Sorted() {
		if !known[name.Topic] && !strings.HasPrefix(name.Topic, "__") {
			others = append(others, topics.Topic{Name: name.Topic, Partitions: int32(len(name.Partitions))})
		}
	}
	return out, others, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitTopics waits until every topic of the catalogue exists as the
// catalogue says (another process, such as a deployment's topics job,
// creates them), checking every 2 s, for at most timeout. A topic the
// cluster refuses to describe to this user is not waited for: a
// component's user sees the topics its spec declares, and only those.
func waitTopics(ctx context.Context, adm *kadm.Client, catalogue []topics.Topic, timeout time.Duration, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		statuses, err := topics.List(ctx, adm, catalogue)
		var missing []string
		refused := 0
		for _, st := range statuses {
			switch {
			case st.Refused:
				refused++
			case !st.Exists:
				missing = append(missing, st.Name+" missing")
			case len(st.Problems) > 0:
				missing = append(missing, st.Name+": "+strings.Join(st.Problems, "; "))
			}
		}
		if err == nil && len(missing) == 0 {
			if refused > 0 {
				fmt.Fprintf(stdout, "%d topics ok, %d not this user's\n", len(catalogue)-refused, refused)
			} else {
				fmt.Fprintf(stdout, "%d topics ok\n", len(catalogue))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New(strings.Join(missing, ", "))
			}
			return fmt.Errorf("topics not there after %v: %w", timeout, err)
		case <-time.After(2 * time.Second):
		}
	}
}
