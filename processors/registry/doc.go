// Package registry is the "registry" processor group of the document
// indexing pipeline (seeds/indexing.md, the receiver's registry made
// event-sourced).
//
// Its input is documents.ingest, keyed "client/pk". For every RawDocument it
// decides, against the epoch schemas of the client and the record it holds
// for the key, whether the document is accepted, stale or invalid; it emits
// that verdict on documents.results, keeps the freshest record per key in its
// group table (registry-table) and emits every change of that table on
// documents.changes for the indexer. Undecodable messages are answered with
// an invalid verdict and kept whole on documents.dead.
//
// Deletes leave a tombstone that blocks older upserts until it expires;
// documents with a TTL become tombstones when it runs out. Expiry is decided
// from message timestamps only, never from the clock of the processor, and
// its triggers (ExpiryChecks, emitted by the group's sweeper) travel through
// documents.ingest itself, so every partition has one total order of events
// and a replay of the log rebuilds the table byte for byte.
//
// The decision functions (Compare, Decide, Expire, Validate) are pure and
// tested without a broker; the group (group.go, a table.Group)
// applies them a batch at a time.
package registry
