// Package component is what a component of offerlog declares of itself,
// in the model of Redpanda Connect's public/service: a processor group, the
// serving cache or a sink exports one Spec, and the composition root
// registers the specs explicitly, in start order (no init()). Everything
// that names components is derived from the specs: `offerlog run`'s
// components, ports and per-component flags, the memory budget's shares,
// the lag component's groups, `offerlog replay` and `offerlog repartition`,
// and the checks of the deploy files.
package component

import (
	"fmt"
	"slices"

	"github.com/offerlog/offerlog/topics"
)

// Spec is one component.
type Spec struct {
	// Name is `offerlog run NAME`'s; a processor group's is its group's.
	Name string
	// Summary says in a line what the component does.
	Summary string
	// User marks a component a user selects (offerlog run NAME); the
	// others run because a selected one needs them.
	User bool
	// Needs are the components started before it, in the same process.
	Needs []string
	// Port is where `offerlog run NAME` serves /metrics and the probes by
	// default (127.0.0.1:Port); 0 for none of its own (the api serves them
	// on its --http).
	Port int
	// Flags are the command-line flags the component reads that a
	// process of other components does without: their names, defaults and
	// help are declared here, and `offerlog run`, `offerlog dev` and
	// `offerlog run NAME --help` take them from the specs. A flag that
	// components of several packages read is one value (shared.go),
	// declared in each of their specs.
	Flags []Flag
	// Stores is how many tables and views of the catalogue's partitions
	// the component keeps in local stores (a timer store counts as one):
	// the memory budget's half for stores is shared out among the stores
	// of the components a process runs.
	Stores int
	// Groups are the consumer groups it commits in, and GroupsOf those the
	// configuration names (a stage's): the lag component watches them, a
	// process that stops leaves them.
	Groups   []string
	GroupsOf func(Instances) []string
	// Tables are the group tables it owns: its replay rebuilds them, a
	// repartition replays them rather than copy them.
	Tables []topics.Table
	// Regenerates are the topics its replay emits again in full (outputs
	// derived from its table that a repartition recreates rather than
	// copies).
	Regenerates []string

	// What it does on the Kafka cluster, from which its user's ACLs are
	// derived (Grants; offerlog deploy init creates them) and the topics
	// its process ensures are chosen. A name ending in "*" is a prefix
	// (saas.*: every client's feed). Reads are the topics it consumes,
	// Writes those it produces to; Creates those it only creates (a new
	// client's feeds); Describes those it only lists (ends, configs, "*"
	// every topic). Its consumer groups are Groups, those
	// GroupsOf names and GroupPrefixes (a stage's groups, which the
	// configuration names); DescribesGroups are groups it only lists
	// ("*" every group). Transactional are the transactional ids it
	// produces with.
	Reads, Writes, Creates, Describes []string
	GroupPrefixes, DescribesGroups    []string
	Transactional                     []string
}

// Flag is a command-line flag of a component: --Name, its Default as the
// command line would give it ("" for the type's zero value, or one the
// process finds, which Usage then says) and its Usage, as flag.FlagSet
// prints it. The composition root binds it to its configuration.
type Flag struct {
	Name, Default, Usage string
}

// Instances are what the configuration names of the components: the
// stages.
type Instances struct {
	Stages []string
}

// GroupsOf returns the consumer groups of specs, those the configuration
// names included, in order, once each.
func GroupsOf(specs []Spec, in Instances) []string {
	var out []string
	for _, s := range specs {
		gs := slices.Clone(s.Groups)
		if s.GroupsOf != nil {
			gs = append(gs, s.GroupsOf(in)...)
		}
		for _, g := range gs {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// Flags returns the flags of specs by name, each once, and for each the
// components that read it.
func Flags(specs []Spec) (map[string]Flag, map[string][]string) {
	flags, readers := map[string]Flag{}, map[string][]string{}
	for _, s := range specs {
		for _, f := range s.Flags {
			flags[f.Name] = f
			readers[f.Name] = append(readers[f.Name], s.Name)
		}
	}
	return flags, readers
}

// Check returns an error unless specs are a platform: names unique and
// set, every need an earlier component, ports unique, a flag declared
// alike by every component that reads it.
func Check(specs []Spec) error {
	seen := map[string]bool{}
	ports := map[int]string{}
	flags := map[string]Flag{}
	for _, s := range specs {
		for _, f := range s.Flags {
			if f.Name == "" || f.Usage == "" {
				return fmt.Errorf("component %s: a flag without a name or a usage: %+v", s.Name, f)
			}
			if other, ok := flags[f.Name]; ok && other != f {
				return fmt.Errorf("component %s: flag --%s declared unlike an earlier component's (%+v, %+v)", s.Name, f.Name, f, other)
			}
			flags[f.Name] = f
		}
		if s.Name == "" {
			return fmt.Errorf("component: a spec without a name")
		}
		if seen[s.Name] {
			return fmt.Errorf("component %s: declared twice", s.Name)
		}
		for _, n := range s.Needs {
			if !seen[n] {
				return fmt.Errorf("component %s: needs %s, not declared before it", s.Name, n)
			}
		}
		if s.Port != 0 {
			if other, ok := ports[s.Port]; ok {
				return fmt.Errorf("component %s: port %d is %s's", s.Name, s.Port, other)
			}
			ports[s.Port] = s.Name
		}
		seen[s.Name] = true
	}
	return nil
}
