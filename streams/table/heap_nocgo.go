//go:build !cgo

package table

// StoresOnGoHeap reports whether the local stores' block cache and
// memtables are Go heap. Built without cgo (the image and the release
// binaries: CGO_ENABLED=0), Pebble's internal/manual falls back to
// make([]byte): the stores' memory is on the heap, and counts against the
// runtime's soft limit.
const StoresOnGoHeap = true
