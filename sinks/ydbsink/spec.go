package ydbsink

import (
	"github.com/offerlog/offerlog/streams/component"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: "sink-ydb", User: true, Port: 8089,
	Summary: "keeps the seeds' YDB tables equal to the log (runs only with --ydb)",
	Groups:  sourceGroups(), Flags: []string{"ydb", "source"}}

func sourceGroups() []string {
	var out []string
	for _, s := range SourceNames() {
		out = append(out, Group(s))
	}
	return out
}
