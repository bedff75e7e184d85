package replay

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Outputs says what a processor run by a replay does with the records
// it emits while it processes input records the group had processed before
// the replay (those its committed offsets covered). Their outputs are
// already with their consumers; writing them again would hand every
// consumer each answer, verdict and export twice. Input records the group
// had not processed yet get their outputs as in a live run, whatever the
// mode: no one has them.
type Outputs int

const (
	// Live is a live processor: every record is written.
	Live Outputs = iota
	// TablesOnly rebuilds the table and writes no output a record
	// already had: what a replay does unless told otherwise.
	TablesOnly
	// Reemit writes those outputs again, each with the Header,
	// by which a consumer tells them from the first run's (and may drop
	// them).
	Reemit
)

// Header is the header of every record a replay re-emits (--reemit).
// Its value is the time the replay started (RFC 3339), which tells one
// replay's records from another's.
const Header = "offerlog-replay"

// String names o as the replay command's output says it.
func (o Outputs) String() string {
	switch o {
	case TablesOnly:
		return "table rebuilt, outputs not written again"
	case Reemit:
		return "table rebuilt, outputs written again with the " + Header + " header"
	}
	return "live"
}

// Emits is what the processor a replay runs needs to know, shared by the
// Spec (which fills answered in Prepare, before the processor starts) and
// the table group's batches (table.Update.Emit).
type Emits struct {
	mode   Outputs
	inputs []string
	// only, if not empty, are the topics a Reemit writes again; the
	// others' outputs of answered records are dropped.
	only   []string
	header map[string][]byte
	// answered are the group's committed offsets before the replay: an
	// input record below its partition's offset had been processed.
	answered kadm.OffsetResponses
	// Counts of emitted records: written as live, dropped, re-emitted.
	live, dropped, marked atomic.Int64
}

func newEmits(mode Outputs, inputs []string) *Emits {
	return &Emits{mode: mode, inputs: slices.Clone(inputs),
		header: map[string][]byte{Header: []byte(time.Now().UTC().Format(time.RFC3339))}}
}

// isLive reports whether the input record at offset of topic's partition
// had not been processed by the group before the replay: its outputs are
// written as in a live run.
func (r *Emits) isLive(topic string, partition int32, offset int64) bool {
	o, ok := r.answered.Lookup(topic, partition)
	return !ok || o.Err != nil || offset >= o.At
}

// reemits reports whether an output to topic of an answered input record is
// written again (marked), not dropped; it counts the choice.
func (r *Emits) reemits(topic string) bool {
	if r.mode == Reemit && !slices.Contains(r.inputs, topic) && (len(r.only) == 0 || slices.Contains(r.only, topic)) {
		// What the group emits to its own inputs is in the log already,
		// and the replay reads it: a copy would be processed twice.
		r.marked.Add(1)
		return true
	}
	r.dropped.Add(1)
	return false
}

// Keep reports whether out, an output of the input record in, is written:
// as in a live run when the group had not processed in before the replay,
// marked with the Header when the replay re-emits, or not at all. It
// counts the choice for the replay's report.
func (r *Emits) Keep(in, out *kgo.Record) bool {
	switch {
	case r.isLive(in.Topic, in.Partition, in.Offset):
		r.live.Add(1)
		return true
	case r.reemits(out.Topic):
		for k, v := range r.header {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: v})
		}
		return true
	}
	return false
}
