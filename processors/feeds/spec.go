package feeds

import (
	"slices"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8087, Stores: 3,
	Summary: "loads bulk feeds: matches items to offers, removes what a finished feed left out",
	Groups:  []string{Group}, Flags: []component.Flag{component.WaitTimeout, component.ViewStaleness},
	Reads: slices.Concat([]string{topics.FeedsIngest, string(topics.FeedsIndex), string(topics.FeedsTasks), string(topics.FeedsStatus)},
		offers.ClientReads, offers.IDsTopics),
	Writes: slices.Concat([]string{string(topics.FeedsStatus), topics.OffersDead}, offers.ClientWrites, offers.IDsTopics)}
