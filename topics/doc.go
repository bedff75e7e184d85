// Package topics is offerlog's topic catalogue: every topic's name,
// partitions, cleanup policy, retention and the Avro schema of its values,
// and the code that creates or checks them on a cluster with kadm.
//
// Topic names are a user-facing contract: users produce to the ingest topics
// and consume the export topics by these names.
package topics
