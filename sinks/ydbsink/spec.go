package ydbsink

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: "sink-ydb", User: true, Port: 8089,
	Summary: "keeps the seeds' YDB tables equal to the log (runs only with --ydb)",
	Groups:  sourceGroups(),
	Reads: []string{string(topics.RegistryTable), string(topics.OffersTable), string(topics.OffersArchive), string(topics.CabinetPresets), string(topics.CabinetTable),
		string(topics.FeedsIndex)},
	Writes: []string{topics.OffersDead}, Flags: []component.Flag{
		{Name: "ydb", Usage: "YDB DSN (grpc://host:2136/local) of the sinks; without it no sink runs"},
		{Name: "source", Usage: "topic(s) the YDB sink follows, comma-separated (default: every topic it maps)"}}}

func sourceGroups() []string {
	var out []string
	for _, s := range SourceNames() {
		out = append(out, Group(s))
	}
	return out
}
