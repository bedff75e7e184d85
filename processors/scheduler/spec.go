package scheduler

import (
	"github.com/offerlog/offerlog/streams/component"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: "scheduler", User: true, Port: 8090, Stores: 2,
	Summary: "the stage scheduler: router, stage workers and timer service",
	Groups:  []string{TimersGroup}, GroupsOf: stageGroups, Flags: []string{"wait-timeout"}}

// stageGroups are the consumer groups of the stages configured.
func stageGroups(in component.Instances) []string {
	var out []string
	for _, s := range in.Stages {
		out = append(out, Group(s, false), Group(s, true), RouterGroupOf(s), PushGroup(s))
	}
	return out
}
