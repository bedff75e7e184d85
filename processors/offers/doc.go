// Package offers is the offer aggregate of the offer storage (GOST): the
// group "offers" (a table.Graph on the table runtime), one table value per offer (the offer, its version,
// its moderation, billing and stage parts), fed by offers.commands,
// photos.results and moderation.opinions (which its inbox copies into
// offers.commands, so that the group decides from one ordered input), all
// keyed by offer id.
//
// Every accepted input writes the next version and emits, in the same
// callback: the full offer on offers.events, the offer's move in its
// seller's cabinet on cabinet.changes, its preset memberships on
// cabinet.presets, its feed index entry on feeds.index and the photos to
// process on photos.requests. Commands are answered on offers.results.
//
// The decision functions (Decide, Validate, PresetsOf, the ids'
// Permutation) are pure and tested without a broker; time is always the
// message's timestamp, so a replay of the inputs writes the same table
// byte for byte. IDs hands out offer ids from claims on offers.ids.
package offers
