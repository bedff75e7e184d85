package numerator

import (
	"strconv"

	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8083, Stores: 2,
	Summary: "gives every offer key its persistent (shard, doc_id), a generation at a time",
	Groups:  []string{Group, SealerGroup}, Tables: []topics.Table{topics.NumeratorTable},
	// numerator.assignments read: the other data centre's, at a handover
	Reads: []string{topics.NumeratorOffers, topics.NumeratorResults, topics.NumeratorGenerations, topics.NumeratorStates,
		topics.NumeratorAssignments, string(topics.NumeratorTable)},
	Writes: []string{topics.NumeratorAssignments, topics.NumeratorDead, topics.NumeratorResults, topics.NumeratorStates,
		string(topics.NumeratorTable)},
	Transactional: []string{TransactionalID + "*"}, // TransactionalIDOf
	Flags: []component.Flag{component.ZooKeeper, component.SessionTimeout,
		{Name: "master", Usage: "this numerator master's name in the coordinator (default: the host's name)"},
		{Name: "peer-kafka-config", Usage: "librdkafka properties file of another data centre's cluster (its bootstrap.servers and its own credentials), " +
			"which the numerator's handover reads; repeat for more (default: this cluster's credentials)"},
		{Name: "lock-timeout", Default: DefaultConfig().LockTimeout.String(), Usage: "longest a numerator master holds the write lock for one build"},
		{Name: "handover-timeout", Default: DefaultHandoverTimeout.String(),
			Usage: "how long a numerator master tries to adopt another data centre's newer state before it declares that state invalid (its master did not hand it over)"},
		{Name: "ttl-generations", Default: strconv.FormatInt(DefaultConfig().TTL, 10), Usage: "generations a key may go unseen before its doc_id is freed"},
		{Name: "rebuild-share", Default: strconv.FormatFloat(DefaultConfig().RebuildShare, 'g', -1, 64),
			Usage: "share of holes in a shard that triggers a rebuild (0: never by itself)"},
		{Name: "scheme", Usage: "sharding scheme of a new numerator state"},
		{Name: "state-type", Usage: "T of the numerator's state version T.S.V.G"},
		component.Standby}}
