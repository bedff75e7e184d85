// Package streams is offerlog's one runtime on franz-go: the consume loop
// every consumer reads through (Loop: a worker per partition, retries,
// dead letters, commits of what is done), the table groups every processor
// runs on (TableGroup, a batch at a time; Graph, Context and Tester, goka's
// model of callbacks on it), views of tables (View), replay (Replay,
// ReplayGroup), codecs over the Avro codecs of package schemas, Kafka's
// murmur2 partitioning, bounded dead letters and request/reply over topics.
package streams
