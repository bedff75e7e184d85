package registry

import (
	"strconv"
	"time"

	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8081, Stores: 1,
	Summary: "decides every document against what its key holds: freshness, tombstones, TTL, epochs",
	Needs:   []string{"epochs"}, Groups: []string{Group}, Tables: []topics.Table{topics.RegistryTable},
	Reads: []string{topics.DocumentsIngest, string(topics.RegistryTable)},
	Writes: []string{topics.DocumentsResults, topics.DocumentsChanges, topics.DocumentsUrgent, topics.DocumentsDead,
		topics.DocumentsIngest, string(topics.RegistryTable)},
	Flags: []component.Flag{MaxDocumentBytesFlag, TombstoneTTLFlag, {Name: "sweep-interval", Default: DefaultSweepInterval.String(),
		Usage: "how often the registry looks for expired documents"},
		{Name: "epoch-grace", Default: DefaultEpochGrace.String(), Usage: "how long after its registration a new epoch makes older epochs stale"},
		component.ExportFraming, component.Standby}}

// The flags of the rules, which the API applies too.
var (
	MaxDocumentBytesFlag = component.Flag{Name: "max-document-bytes", Default: strconv.Itoa(DefaultRules().MaxDocumentBytes),
		Usage: "largest accepted document, encoded"}
	TombstoneTTLFlag = component.Flag{Name: "tombstone-ttl", Default: DefaultRules().TombstoneTTL.String(), Usage: "how long a delete blocks older versions"}
)

// DefaultSweepInterval is how often the registry looks for expired
// documents unless told.
const DefaultSweepInterval = time.Minute
