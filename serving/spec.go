package serving

import (
	"strconv"

	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// The defaults of the cache's own flags that the process's default
// configuration also holds.
const (
	DefaultAddr   = "127.0.0.1:9091"
	DefaultShards = 1
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: "cache", User: true, Port: 8088,
	Summary: "the serving cache's server: a shard of table topics in memory (the archive on disk), answering Get",
	Needs:   []string{"auth"},
	// the tables the manifests' --table names; a cache of another table
	// needs its Read granted
	Reads: []string{string(topics.OffersTable), string(topics.RegistryTable), string(topics.OffersArchive)},
	Flags: []component.Flag{component.GRPC, component.ZooKeeper, component.SessionTimeout,
		{Name: "table", Default: string(topics.OffersTable),
			Usage: "the table topic the cache serves, or several comma-separated (one port; --reads cache needs offers-table,registry-table,offers.archive)"},
		{Name: "cache-grpc", Default: DefaultAddr, Usage: "gRPC address of the cache (run cache takes --grpc too)"},
		{Name: "host", Usage: "the cache server's name in ZooKeeper (default: the hostname)"},
		{Name: "shards", Default: strconv.Itoa(DefaultShards), Usage: "how many shards the cache's table is cut into (more than 1 needs --zookeeper); " +
			"a data centre grows by starting the servers of a larger count beside the old ones, then stopping those"},
		{Name: "virtual-shards", Default: strconv.Itoa(DefaultVirtual), Usage: "the cache cuts its tables by hash ranges of this many virtual shards " +
			"(each server reads every partition and keeps its range's keys; a data centre grows up to that many shards); 0 cuts by ranges of partitions, as before 0.5.0"},
		{Name: "cache-on-disk", Default: string(topics.OffersArchive), Usage: "the tables (comma-separated) the cache keeps on disk under --data, not in memory: " +
			"a year of archived offers is far larger than the active ones and read far less (\"\": every table in memory)"},
		component.DC}}
