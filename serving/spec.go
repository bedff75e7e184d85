package serving

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: "cache", User: true, Port: 8088,
	Summary: "the serving cache's server: a shard of table topics in memory (the archive on disk), answering Get",
	Needs:   []string{"auth"},
	// the tables the manifests' --table names; a cache of another table
	// needs its Read granted
	Reads: []string{topics.OffersTable, topics.RegistryTable, topics.OffersArchive},
	Flags: []string{"grpc", "zookeeper", "session-timeout", "table", "cache-grpc", "host", "shards", "virtual-shards", "cache-on-disk", "dc"}}
