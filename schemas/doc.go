// Package schemas holds every wire contract of offerlog: the Avro schemas of
// the events (embedded from avro/*.avsc), the Go types they decode into, the
// single-object framing that lets a reader find the writer's schema, and the
// conversion between events and JSON used by the CLI.
//
// Every schema ever released is kept under released/<version>/, so a reader
// can decode data written by any release, and a test checks that the current
// schemas stay backward and forward compatible with each released one.
package schemas
