package numerator

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8083, Stores: 2,
	Summary: "gives every offer key its persistent (shard, doc_id), a generation at a time",
	Groups:  []string{Group, SealerGroup}, Tables: []string{topics.NumeratorTable},
	Flags: []string{"zookeeper", "session-timeout", "master", "lock-timeout", "ttl-generations", "rebuild-share", "scheme", "state-type", "standby"}}
