package topics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrMismatch is returned (wrapped, joined per problem) by Ensure when an
// existing topic differs from the catalogue in a way Ensure will not change:
// its partition count or its cleanup policy.
var ErrMismatch = errors.New("topic differs from the catalogue")

// Status is what List found for a catalogue topic.
type Status struct {
	Topic
	Exists bool
	// Refused says the cluster would not describe it to this user (its
	// ACLs do not name it: Kafka does not say whether it exists).
	Refused bool
	// ActualPartitions and ActualConfigs are what the cluster has.
	ActualPartitions int32
	ActualConfigs    map[string]string
	// Problems lists the differences from the catalogue.
	Problems []string
}

// Ensure creates the topics of ts that do not exist (replication -1 takes the
// broker default) and checks the ones that do. It returns the names it
// created and an error joining every problem found: an ErrMismatch for each
// topic whose partitions or cleanup policy differ, and any request error.
// Retention that differs is set to the catalogue's value.
func Ensure(ctx context.Context, adm *kadm.Client, replication int16, ts []Topic) ([]string, error) {
	statuses, err := List(ctx, adm, ts)
	if err != nil {
		return nil, err
	}
	var created []string
	var errs []error
	for _, st := range statuses {
		if !st.Exists {
			cfg := map[string]*string{}
			for k, v := range st.Configs() {
				cfg[k] = kadm.StringPtr(v)
			}
			resp, err := adm.CreateTopics(ctx, st.Partitions, replication, cfg, st.Name)
			if err != nil {
				errs = append(errs, fmt.Errorf("create %s: %w", st.Name, err))
				continue
			}
			for _, r := range resp {
				switch {
				case r.Err == nil:
					created = append(created, r.Topic)
				case errors.Is(r.Err, kerr.TopicAlreadyExists):
					// Created concurrently by another instance: fine.
				default:
					errs = append(errs, fmt.Errorf("create %s: %w (%s)", r.Topic, r.Err, r.ErrMessage))
				}
			}
			continue
		}
		var alter []kadm.AlterConfig
		for _, p := range st.Problems {
			if strings.HasPrefix(p, "retention.ms") {
				alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr(st.Configs()["retention.ms"])})
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %s: %w", st.Name, p, ErrMismatch))
		}
		if len(alter) > 0 {
			resp, err := adm.AlterTopicConfigs(ctx, alter, st.Name)
			if err == nil {
				for _, r := range resp {
					err = errors.Join(err, r.Err)
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("set retention of %s: %w", st.Name, err))
			}
		}
	}
	sort.Strings(created)
	return created, errors.Join(errs...)
}

// List describes the topics of ts on the cluster: whether each exists, its
// partitions and configs, and how it differs from the catalogue.
func List(ctx context.Context, adm *kadm.Client, ts []Topic) ([]Status, error) {
	names := Names(ts)
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var existing []string
	for _, n := range names {
		if d, ok := details[n]; ok && d.Err == nil {
			existing = append(existing, n)
		}
	}
	configs := map[string]map[string]string{}
	if len(existing) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, existing...)
		if err != nil {
			return nil, fmt.Errorf("describe topic configs: %w", err)
		}
		for _, rc := range rcs {
			m := map[string]string{}
			for _, c := range rc.Configs {
				if c.Value != nil {
					m[c.Key] = *c.Value
				}
			}
			configs[rc.Name] = m
		}
	}
	out := make([]Status, 0, len(ts))
	for _, t := range ts {
		st := Status{Topic: t}
		d, ok := details[t.Name]
		st.Refused = ok && errors.Is(d.Err, kerr.TopicAuthorizationFailed)
		if ok && d.Err == nil {
			st.Exists = true
			st.ActualPartitions = int32(len(d.Partitions))
			st.ActualConfigs = configs[t.Name]
			if st.ActualPartitions != t.Partitions {
				st.Problems = append(st.Problems, fmt.Sprintf("has %d partitions, catalogue says %d", st.ActualPartitions, t.Partitions))
			}
			for k, want := range t.Configs() {
				got, ok := st.ActualConfigs[k]
				if k == "cleanup.policy" && !ok {
					got = "delete"
				}
				if got != want {
					st.Problems = append(st.Problems, fmt.Sprintf("%s is %q, catalogue says %q", k, got, want))
				}
			}
			sort.Strings(st.Problems)
		}
		out = append(out, st)
	}
	return out, nil
}
