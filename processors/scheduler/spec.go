package scheduler

import (
	"slices"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: "scheduler", User: true, Port: 8090, Stores: 2,
	Summary: "the stage scheduler: router, stage workers and timer service",
	Groups:  []string{TimersGroup}, GroupsOf: stageGroups, Flags: []component.Flag{component.WaitTimeout},
	// a stage's groups: scheduler-<...>-STAGE
	GroupPrefixes: []string{"scheduler-"},
	Reads: slices.Concat([]string{topics.OffersEvents, string(topics.OffersTable), topics.QueuePrefix + "*", topics.PushPrefix + "*",
		topics.SchedulerTimers, topics.SchedulerDead}, offers.ClientReads),
	Writes: slices.Concat([]string{topics.SchedulerDead, topics.SchedulerTimers, topics.SchedulerEffects, topics.QueuePrefix + "*"},
		offers.ClientWrites)}

// stageGroups are the consumer groups of the stages configured.
func stageGroups(in component.Instances) []string {
	var out []string
	for _, s := range in.Stages {
		out = append(out, Group(s, false), Group(s, true), RouterGroupOf(s), PushGroup(s))
	}
	return out
}
