// Package numerator holds what the numerator group (seeds/numerator.md)
// shares with the code around it: the state version T.S.V.G and the rule
// that says which data can be used with which state.
//
// Subpackages: sharding (the sharding schemes: an offer's shard for a
// scheme) and coordinator (the multi-DC write lock and the pointer to the
// last consistent state, in ZooKeeper or in process).
package numerator
