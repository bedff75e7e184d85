//go:build cgo

package table

// StoresOnGoHeap reports whether the local stores' block cache and
// memtables are Go heap. Built with cgo, Pebble allocates them with C's
// malloc (its internal/manual): outside the heap and the runtime's soft
// limit.
const StoresOnGoHeap = false
