package registry

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8081, Stores: 1,
	Summary: "decides every document against what its key holds: freshness, tombstones, TTL, epochs",
	Needs:   []string{"epochs"}, Groups: []string{Group}, Tables: []string{topics.RegistryTable},
	Reads: []string{topics.DocumentsIngest, topics.RegistryTable},
	Writes: []string{topics.DocumentsResults, topics.DocumentsChanges, topics.DocumentsUrgent, topics.DocumentsDead,
		topics.DocumentsIngest, topics.RegistryTable},
	Flags: []string{"max-document-bytes", "tombstone-ttl", "sweep-interval", "epoch-grace", "export-framing", "standby"}}
