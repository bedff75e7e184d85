// Package streams is how offerlog talks to Kafka, on franz-go: the
// Cluster every client is made by (brokers, credentials, settings, one
// shared admin client), the consume loop every consumer reads through
// (Loop: a worker per partition, retries, dead letters, commits of what is
// done), reads of a topic up to offsets (ReadRange, ReadToEnd), the codecs
// of topics and tables (Codec, Bytes, and Avro and Table over the Avro
// codecs of package schemas), Kafka's murmur2 partitioning, bounded dead
// letters and their re-drive, and request/reply over topics (Replies).
//
// The table runtime the processors run on (groups that keep a table,
// goka's model of callbacks on it, views) is package streams/table;
// rebuilding a group from its inputs is package streams/replay.
package streams
