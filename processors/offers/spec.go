package offers

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8084, Stores: 1,
	Summary: "the offer aggregate: applies every command to its offer and exports the change",
	Groups:  []string{Group, InboxGroup}, Tables: []topics.Table{topics.OffersTable}, Regenerates: []string{topics.CabinetChanges},
	Reads: []string{topics.OffersCommands, string(topics.OffersTable), topics.PhotosResults, topics.ModerationOpinions},
	Writes: []string{topics.OffersCommands, topics.OffersEvents, topics.OffersResults, topics.OffersDead, topics.PhotosRequests,
		topics.CabinetChanges, string(topics.CabinetPresets), string(topics.FeedsIndex), string(topics.FeedsTasks), topics.SchedulerTimers,
		topics.SchedulerEffects, string(topics.OffersArchive), topics.QueuePrefix + "*", string(topics.OffersTable)},
	Flags: []component.Flag{component.ExportFraming, {Name: "archive-after", Default: DefaultArchiveAfter.String(),
		Usage: "how long an offer stays in offers-table once deleted, sold or expired before it moves to offers.archive (0: never); " +
			"a replay needs the value the log was written with"}, component.Standby}}

// The topics a client of the aggregate reads and writes: Client writes
// commands and reads their answers, IDs draws blocks of ids on offers.ids.
// Its components add them to theirs.
var (
	ClientReads  = []string{topics.OffersResults}
	ClientWrites = []string{topics.OffersCommands}
	IDsTopics    = []string{topics.OffersIDs}
)
