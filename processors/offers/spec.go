package offers

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8084, Stores: 1,
	Summary: "the offer aggregate: applies every command to its offer and exports the change",
	Groups:  []string{Group, InboxGroup}, Tables: []string{topics.OffersTable}, Regenerates: []string{topics.CabinetChanges},
	Flags: []string{"export-framing", "archive-after", "standby"}}
