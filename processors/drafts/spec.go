package drafts

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8085, Stores: 1,
	Summary: "keeps the sellers' drafts by the seed's reset rules",
	Groups:  []string{Group}, Tables: []topics.Table{topics.DraftsTable}, Flags: []component.Flag{component.Standby},
	Reads:  []string{topics.DraftsCommands, string(topics.DraftsTable)},
	Writes: []string{topics.DraftsResults, topics.OffersDead, topics.OffersCommands, string(topics.DraftsTable)}}
