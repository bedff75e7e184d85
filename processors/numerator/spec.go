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
	// numerator.assignments read: the other data centre's, at a handover
	Reads: []string{topics.NumeratorOffers, topics.NumeratorResults, topics.NumeratorGenerations, topics.NumeratorStates,
		topics.NumeratorAssignments, topics.NumeratorTable},
	Writes: []string{topics.NumeratorAssignments, topics.NumeratorDead, topics.NumeratorResults, topics.NumeratorStates,
		topics.NumeratorTable},
	Transactional: []string{TransactionalID + "*"}, // TransactionalIDOf
	Flags:         []string{"zookeeper", "session-timeout", "master", "peer-kafka-config", "lock-timeout", "handover-timeout", "ttl-generations", "rebuild-share", "scheme", "state-type", "standby"}}
