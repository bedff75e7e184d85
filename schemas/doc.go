// Package schemas holds every wire contract of offerlog: the Avro schemas of
// the events (embedded from avro/*.avsc), the Go types they decode into, the
// single-object framing that lets a reader find the writer's schema, and the
// conversion between events and JSON used by the CLI.
//
// Every schema ever released is kept under released/<version>/, so a reader
// can decode data written by any release, and a test checks that the current
// schemas stay backward and forward compatible with each released one.
//
// # Fingerprints
//
// The single-object header (C3 01, then 8 bytes little-endian) carries the
// CRC-64-AVRO fingerprint of the schema's Parsing Canonical Form exactly as
// the Avro specification defines it (CanonicalForm): what every
// spec-following library (Java's SchemaNormalization, avro-python, goavro,
// avsc with a spec fingerprint) computes, so their records decode here and
// ours there. A test recomputes both for every schema from the files' JSON
// by the spec's rules, without hamba/avro.
//
// Releases before v0.4.0 wrote hamba/avro's fingerprint, of a canonical
// form that keeps logicalType: it differs for every schema with a
// timestamp. Those legacy fingerprints still resolve (Schema.LegacyFingerprint)
// and will for as long as data written by v0.3.x can exist: every release
// through v0.5.x reads them, and they are removed only in a release whose
// notes say so, after a replay has rewritten every compacted topic. The
// topics replays read (documents.ingest and the like) keep their records for
// ever since v0.5.0, so that release's notes must also say how to rewrite
// them (or to keep reading legacy fingerprints while they hold such
// records). Nothing is written with them any more.
package schemas
