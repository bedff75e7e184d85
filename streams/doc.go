// Package streams binds topics to their codecs and to the clients that read
// and write them: goka codecs over the Avro codecs of package schemas, the
// goka and franz-go configuration every processor shares (acks=all, oldest
// offsets, Kafka's murmur2 partitioning, state under the data directory),
// dead letters, and request/reply over topics.
package streams
