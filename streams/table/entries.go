package table

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
)

// Entries is a table batch's values decoded into Ts: the values of the
// batch's keys read at once (Update.Values), each decoded when first
// asked for, changed in memory record by record, and each changed one
// encoded and set once (Flush). Table handlers read and write their table
// through it.
type Entries[T any] struct {
	b       BatchTable
	codec   *schemas.Codec[T]
	garbage func(r *kgo.Record, d *schemas.DeadLetter)
	keys    []string
	stored  map[string][]byte
	values  map[string]*T
	changed map[string]bool
}

// LoadEntries reads the values of b's keys. A stored value that does not
// decode is handed to garbage, when its key is first asked for, as the
// dead letter of a value of the table topic (offset -1), and taken as
// absent: the value the record sets replaces it.
func LoadEntries[T any](b BatchTable, c *schemas.Codec[T], garbage func(r *kgo.Record, d *schemas.DeadLetter)) (*Entries[T], error) {
	in := b.Input()
	keys := make([]string, len(in.Records))
	for i, r := range in.Records {
		keys[i] = string(r.Key)
	}
	stored, err := b.Values(keys)
	if err != nil {
		return nil, err
	}
	return &Entries[T]{b: b, codec: c, garbage: garbage, keys: keys, stored: stored,
		values: make(map[string]*T, len(stored)), changed: map[string]bool{}}, nil
}

// Get returns the value of r's key, nil if none.
func (e *Entries[T]) Get(r *kgo.Record) *T {
	k := string(r.Key)
	if v, ok := e.values[k]; ok {
		return v
	}
	var v *T
	if data, ok := e.stored[k]; ok {
		d := new(T)
		if err := e.codec.Decode(data, d); err != nil {
			group, table := e.b.Names()
			e.garbage(r, streams.NewDeadLetter(group, table, r.Partition, -1, r.Key, data, r.Timestamp,
				"undecodable table value, taken as absent: "+err.Error()))
		} else {
			v = d
		}
	}
	e.values[k] = v
	return v
}

// Set makes v the value of r's key (nil deletes it).
func (e *Entries[T]) Set(r *kgo.Record, v *T) {
	e.values[string(r.Key)] = v
	e.changed[string(r.Key)] = true
}

// Flush sets in the batch the value of every key that changed, once each,
// in the order the batch's records first named them.
func (e *Entries[T]) Flush() error {
	for _, k := range e.keys {
		if !e.changed[k] {
			continue
		}
		delete(e.changed, k)
		v := e.values[k]
		if v == nil {
			e.b.Set(k, nil)
			continue
		}
		data, err := e.codec.Encode(v)
		if err != nil {
			group, _ := e.b.Names()
			return streams.Fatal(fmt.Errorf("%s: encode the value of %q: %w", group, k, err))
		}
		e.b.Set(k, data)
	}
	return nil
}
