package indexer

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8082,
	Summary: "converts accepted documents and delivers them to each client's SaaS and YT feeds",
	Needs:   []string{"registry-view"}, Groups: []string{Group, RetryGroup, UrgentGroup},
	Reads:  []string{topics.DocumentsChanges, topics.DocumentsUrgent, topics.DocumentsFailed},
	Writes: []string{topics.SaasPrefix + "*", topics.YtPrefix + "*", topics.DocumentsFailed, topics.DocumentsDead},
	Flags:  []component.Flag{component.ExportFraming, component.ViewStaleness}}
