package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/offerlog/offerlog/third_party/forked/avro"
)

// Codec encodes values of type T with the current schema of one record and
// decodes data written with that schema or any schema this binary knows that
// resolves to it. It is safe for concurrent use.
type Codec[T any] struct {
	err    error // set when the schema failed to load
	reader *Schema
	compat *avro.SchemaCompatibility

	mu       sync.RWMutex
	resolved map[uint64]avro.Schema // writer fingerprint -> schema resolved for reader
}

// NewCodec returns a codec for the current schema named name. It returns an
// error if no such schema exists.
func NewCodec[T any](name string) (*Codec[T], error) {
	s, err := Current(name)
	if err != nil {
		return nil, err
	}
	return &Codec[T]{reader: s, compat: avro.NewSchemaCompatibility(), resolved: map[uint64]avro.Schema{}}, nil
}

// codecFor is NewCodec for the package's codecs of embedded schemas. A
// schema that fails to load is a build defect that every test catches; the
// codec then answers every call with that error instead of panicking.
func codecFor[T any](name string) *Codec[T] {
	c, err := NewCodec[T](name)
	if err != nil {
		return &Codec[T]{err: err}
	}
	return c
}

// Schema returns the reader (current) schema of the codec.
func (c *Codec[T]) Schema() *Schema { return c.reader }

// Encode returns v framed with the current schema (single-object encoding).
func (c *Codec[T]) Encode(v *T) ([]byte, error) { return c.EncodeFramed(v, FramingSOE) }

// EncodeFramed returns v encoded with the current schema in framing f.
func (c *Codec[T]) EncodeFramed(v *T, f Framing) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	// The frame and the body are written into one reused buffer and
	// copied out once (avro.Marshal copied the body out, and the frame
	// copied it again).
	w := writers.Get().(*avro.Writer)
	defer func() {
		if cap(w.Buffer()) <= maxPooledWriter {
			writers.Put(w)
		}
	}()
	w.Reset(nil)
	w.Error = nil
	var header [10]byte
	if f == FramingConfluent {
		w.Write(appendConfluentHeader(header[:0], c.reader))
	} else {
		w.Write(appendSOEHeader(header[:0], c.reader))
	}
	w.WriteVal(c.reader.Avro, v)
	if w.Error != nil {
		return nil, fmt.Errorf("schemas: encode %s: %w", c.reader.Name, w.Error)
	}
	return bytes.Clone(w.Buffer()), nil
}

// writers are the encoders' avro.Writers, reused; one that grew past
// maxPooledWriter (a large value) is left to the collector.
var writers = sync.Pool{New: func() any { return avro.NewWriter(nil, 512) }}

const maxPooledWriter = 64 << 10

// Framing is how a value names its writer schema ahead of its Avro body.
// Every reader takes both; writers of export topics use the one configured.
type Framing string

// Framings.
const (
	// FramingSOE is Avro's single-object encoding: C3 01 and the 8-byte
	// fingerprint of the schema's Parsing Canonical Form.
	FramingSOE Framing = "soe"
	// FramingConfluent is Confluent's: a zero byte and the schema's 4-byte
	// registry id (the schema registry API's).
	FramingConfluent Framing = "confluent"
)

// ParseFraming returns the framing named s ("" is soe).
func ParseFraming(s string) (Framing, error) {
	switch Framing(s) {
	case "", FramingSOE:
		return FramingSOE, nil
	case FramingConfluent:
		return FramingConfluent, nil
	}
	return "", fmt.Errorf("framing %q: want soe or confluent", s)
}

// Decode decodes framed data into v, resolving the writer's schema against
// the current one. It returns ErrNotFramed or ErrUnknownSchema (wrapped) for
// data it cannot place, and an error for data that does not fit.
func (c *Codec[T]) Decode(data []byte, v *T) error {
	if c.err != nil {
		return c.err
	}
	w, body, err := Writer(data)
	if err != nil {
		return err
	}
	sch, err := c.readerFor(w)
	if err != nil {
		return err
	}
	if err := unmarshalAll(sch, body, v); err != nil {
		return fmt.Errorf("schemas: decode %s: %w", c.reader.Name, err)
	}
	return nil
}

// ErrTrailingBytes is returned for a body with bytes left after its value.
var ErrTrailingBytes = errors.New("bytes left after the value")

// readers are the decoders' avro.Readers, reused. A Reader cuts the
// strings and bytes it decodes from a slab of 1 KiB it allocates: a fresh
// Reader per value allocated that slab for every decode (7 GB of the
// numerator bench's 27 GB of allocations), and every string kept pinned a
// slab of its own (a sealer holding a million keys held a GiB). A reused
// Reader cuts one slab into the values of many decodes; third_party/forked/avro's
// patch 1 keeps a decoded []byte from reaching into what follows it.
var readers = sync.Pool{New: func() any { return avro.NewReader(nil, 0) }}

// unmarshalAll decodes body into v and checks that the value took all of
// it: avro.Unmarshal takes a body cut short at an end of input as complete
// (it treats io.EOF as success) and ignores bytes after the value.
func unmarshalAll(sch avro.Schema, body []byte, v any) error {
	r := readers.Get().(*avro.Reader)
	defer func() {
		r.Reset(nil)
		r.Error = nil
		readers.Put(r)
	}()
	r.Reset(body)
	r.ReadVal(sch, v)
	if r.Error != nil {
		if errors.Is(r.Error, io.EOF) {
			return fmt.Errorf("body cut short after %d bytes: %w", len(body), io.ErrUnexpectedEOF)
		}
		return r.Error
	}
	if r.Peek(); r.Error == nil {
		return ErrTrailingBytes
	}
	return nil
}

func (c *Codec[T]) readerFor(w *Schema) (avro.Schema, error) {
	if w.Fingerprint == c.reader.Fingerprint {
		return c.reader.Avro, nil
	}
	c.mu.RLock()
	s, ok := c.resolved[w.Fingerprint]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	if err := c.compat.Compatible(c.reader.Avro, w.Avro); err != nil {
		return nil, fmt.Errorf("schemas: %s (release %q) cannot be read as %s: %w", w.Name, w.Release, c.reader.Name, err)
	}
	s, err := c.compat.Resolve(c.reader.Avro, w.Avro)
	if err != nil {
		return nil, fmt.Errorf("schemas: resolve %s: %w", c.reader.Name, err)
	}
	c.mu.Lock()
	c.resolved[w.Fingerprint] = s
	c.mu.Unlock()
	return s, nil
}
