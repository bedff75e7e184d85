// Package indexer is the "indexer" group of the document-indexing pipeline
// (seeds/indexing.md): it reads every change of the registry from
// documents.changes, converts it, and delivers it to the client's export
// topics: saas.<client>, the search feed (the current document or its
// deletion), and yt.<client>, the archive (every accepted version with its
// body).
//
// A change that cannot be converted or delivered is never dropped: it goes
// to documents.failed with the reason, and a second consumer group
// ("indexer-retry") retries it with backoff for as long as it takes.
//
// Only current versions reach the search feed (indexing.md: a queue entry
// whose version is gone is skipped): on the main queue a change followed by
// another of its key in the same batch, or one the registry has moved past
// (Superseded), goes to the archive only; a retry goes to the search feed
// only if the registry still holds that version, so a late retry never
// overwrites a newer document.
//
// The indexer is a franz-go consumer group rather than a table group: it
// keeps no table, and a Graph cannot emit to topics named at run time (one
// feed per client). It commits its offsets only after every output of a poll was
// acknowledged by all in-sync replicas.
package indexer
