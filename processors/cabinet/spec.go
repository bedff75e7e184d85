package cabinet

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8086, Stores: 1,
	Summary: "counts every seller's presets and counters from the aggregate's changes",
	Groups:  []string{Group}, Tables: []topics.Table{topics.CabinetTable}, Flags: []component.Flag{component.Standby},
	Reads:  []string{topics.CabinetChanges, string(topics.CabinetTable)},
	Writes: []string{topics.OffersDead, string(topics.CabinetTable)}}
