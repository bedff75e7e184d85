package streams

import (
	"fmt"

	"github.com/offerlog/offerlog/schemas"
)

// A Codec encodes and decodes the values of a topic or a table: goka's
// Codec, which the processors' graphs name for their table and outputs.
type Codec interface {
	Encode(value any) ([]byte, error)
	Decode(data []byte) (any, error)
}

// Bytes is the Codec of values taken as they are.
type Bytes struct{}

// Encode returns a []byte as it is (nil for nil).
func (Bytes) Encode(value any) ([]byte, error) {
	switch v := value.(type) {
	case []byte:
		return v, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("streams: the bytes codec cannot encode %T", value)
}

// Decode returns data.
func (Bytes) Decode(data []byte) (any, error) { return data, nil }

// Avro is a Codec over an Avro codec of package schemas. Decode returns a
// *T. Safe for concurrent use.
type Avro[T any] struct {
	C *schemas.Codec[T]
	// Framing of the values it encodes (default: single-object encoding);
	// it decodes both.
	Framing schemas.Framing
}

// Encode encodes a *T or a T; []byte is taken as already encoded, so a
// value written to a table and a topic is encoded once.
func (a Avro[T]) Encode(value any) ([]byte, error) {
	switch v := value.(type) {
	case []byte:
		return v, nil
	case *T:
		return a.C.EncodeFramed(v, a.Framing)
	case T:
		return a.C.EncodeFramed(&v, a.Framing)
	}
	return nil, fmt.Errorf("streams: codec of %s cannot encode %T", a.C.Schema().Name, value)
}

// Decode decodes data into a new *T.
func (a Avro[T]) Decode(data []byte) (any, error) {
	v := new(T)
	if err := a.C.Decode(data, v); err != nil {
		return nil, err
	}
	return v, nil
}

// Table is the codec of a table's values: Avro, except that a value that
// does not decode (garbage written to the table topic) decodes to
// *Undecodable instead of an error, which would stop the group at every
// record of that key, for ever. Read values with TableValue.
type Table[T any] struct{ C *schemas.Codec[T] }

// Undecodable is a table value that did not decode, and why.
type Undecodable struct {
	Data []byte
	Err  error
}

// Encode is Avro's.
func (t Table[T]) Encode(value any) ([]byte, error) { return Avro[T]{C: t.C}.Encode(value) }

// Decode returns a *T, or an *Undecodable.
func (t Table[T]) Decode(data []byte) (any, error) {
	v := new(T)
	if err := t.C.Decode(data, v); err != nil {
		return &Undecodable{Data: data, Err: err}, nil
	}
	return v, nil
}
