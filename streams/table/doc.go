// Package table is the table runtime every processor group of offerlog
// runs on, over the consume loop of package streams: a Group is a
// consumer group that keeps a table (its changelog topic, a local Pebble
// store per partition) and handles its input a batch at a time; a Graph
// (inputs with callbacks, the table's codec, outputs) and a Context are
// goka's model of a processor on it, and a Tester runs a graph's
// callbacks without a broker. A View copies a table's changelog into a
// local store and answers Get as a goka view does. Replay rebuilds a
// group from its inputs (package streams/replay).
package table
