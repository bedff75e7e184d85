package avro

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"unsafe"

	"github.com/modern-go/reflect2"
)

func createDecoderOfArray(d *decoderContext, schema *ArraySchema, typ reflect2.Type) ValDecoder {
	if typ.Kind() == reflect.Slice {
		return decoderOfArray(d, schema, typ)
	}

	return &errorDecoder{err: fmt.Errorf("avro: %s is unsupported for Avro %s", typ.String(), schema.Type())}
}

func createEncoderOfArray(e *encoderContext, schema *ArraySchema, typ reflect2.Type) ValEncoder {
	if typ.Kind() == reflect.Slice {
		return encoderOfArray(e, schema, typ)
	}

	return &errorEncoder{err: fmt.Errorf("avro: %s is unsupported for Avro %s", typ.String(), schema.Type())}
}

func decoderOfArray(d *decoderContext, arr *ArraySchema, typ reflect2.Type) ValDecoder {
	sliceType := typ.(*reflect2.UnsafeSliceType)
	decoder := decoderOfType(d, arr.Items(), sliceType.Elem())
	// offerlog patch 2: an array of floats into a []float32 (embeddings)
	// is read a block at a time, not through a codec call per element.
	if _, ok := decoder.(*float32Codec); ok && sliceType.Elem().Kind() == reflect.Float32 {
		return float32ArrayDecoder{}
	}

	return &arrayDecoder{typ: sliceType, decoder: decoder}
}

type arrayDecoder struct {
	typ     *reflect2.UnsafeSliceType
	decoder ValDecoder
}

func (d *arrayDecoder) Decode(ptr unsafe.Pointer, r *Reader) {
	var size int
	sliceType := d.typ

	if sliceType.UnsafeIsNil(ptr) {
		sliceType.UnsafeSet(ptr, sliceType.UnsafeMakeSlice(0, 0))
	}

	for {
		l, _ := r.ReadBlockHeader()
		if l == 0 {
			break
		}

		start := size
		size += int(l)

		if size > r.cfg.getMaxSliceAllocSize() {
			r.ReportError("decode array", "size is greater than `Config.MaxSliceAllocSize`")
			return
		}

		sliceType.UnsafeGrow(ptr, size)

		for i := start; i < size; i++ {
			elemPtr := sliceType.UnsafeGetIndex(ptr, i)
			d.decoder.Decode(elemPtr, r)
			if r.Error != nil {
				r.Error = fmt.Errorf("reading %s: %w", d.typ.String(), r.Error)
				return
			}
		}
	}

	if r.Error != nil && !errors.Is(r.Error, io.EOF) {
		r.Error = fmt.Errorf("%v: %w", d.typ, r.Error)
	}
}

func encoderOfArray(e *encoderContext, arr *ArraySchema, typ reflect2.Type) ValEncoder {
	sliceType := typ.(*reflect2.UnsafeSliceType)
	encoder := encoderOfType(e, arr.Items(), sliceType.Elem())
	// offerlog patch 2: a []float32 as an array of floats is written a
	// block at a time, the same bytes as arrayEncoder's.
	if _, ok := encoder.(*float32Codec); ok && sliceType.Elem().Kind() == reflect.Float32 {
		return float32ArrayEncoder{blockLength: e.cfg.getBlockLength()}
	}

	return &arrayEncoder{
		blockLength: e.cfg.getBlockLength(),
		typ:         sliceType,
		encoder:     encoder,
	}
}

type arrayEncoder struct {
	blockLength int
	typ         *reflect2.UnsafeSliceType
	encoder     ValEncoder
}

func (e *arrayEncoder) Encode(ptr unsafe.Pointer, w *Writer) {
	blockLength := e.blockLength
	length := e.typ.UnsafeLengthOf(ptr)

	for i := 0; i < length; i += blockLength {
		w.WriteBlockCB(func(w *Writer) int64 {
			count := int64(0)
			for j := i; j < i+blockLength && j < length; j++ {
				elemPtr := e.typ.UnsafeGetIndex(ptr, j)
				e.encoder.Encode(elemPtr, w)
				if w.Error != nil && !errors.Is(w.Error, io.EOF) {
					w.Error = fmt.Errorf("%s: %w", e.typ.String(), w.Error)
					return count
				}
				count++
			}

			return count
		})
	}

	w.WriteBlockHeader(0, 0)

	if w.Error != nil && !errors.Is(w.Error, io.EOF) {
		w.Error = fmt.Errorf("%v: %w", e.typ, w.Error)
	}
}

// float32ArrayDecoder reads an array of floats into a []float32 (offerlog
// patch 2): each block's floats straight from the buffer when it holds
// them all.
type float32ArrayDecoder struct{}

func (float32ArrayDecoder) Decode(ptr unsafe.Pointer, r *Reader) {
	s := (*[]float32)(ptr)
	out := (*s)[:0]
	if out == nil {
		out = []float32{}
	}
	for {
		l, _ := r.ReadBlockHeader()
		if l == 0 || r.Error != nil {
			break
		}
		if l < 0 || len(out)+int(l) > r.cfg.getMaxSliceAllocSize() {
			r.ReportError("decode array", "size is greater than `Config.MaxSliceAllocSize`")
			return
		}
		n := int(l)
		if r.tail-r.head >= 4*n {
			// Grown by what the buffer holds: a count the data does not
			// back allocates nothing ahead.
			out = slices.Grow(out, n)
			for i := range n {
				out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(r.buf[r.head+4*i:])))
			}
			r.head += 4 * n
			continue
		}
		for range n {
			out = append(out, r.ReadFloat())
			if r.Error != nil {
				r.Error = fmt.Errorf("reading []float32: %w", r.Error)
				*s = out
				return
			}
		}
	}
	*s = out
	if r.Error != nil && !errors.Is(r.Error, io.EOF) {
		r.Error = fmt.Errorf("[]float32: %w", r.Error)
	}
}

// float32ArrayEncoder writes a []float32 as an array of floats (offerlog
// patch 2): blocks of blockLength, each with its count and byte size, as
// arrayEncoder's WriteBlockCB writes them.
type float32ArrayEncoder struct{ blockLength int }

func (e float32ArrayEncoder) Encode(ptr unsafe.Pointer, w *Writer) {
	s := *(*[]float32)(ptr)
	for i := 0; i < len(s); i += e.blockLength {
		block := s[i:min(i+e.blockLength, len(s))]
		w.WriteBlockHeader(int64(len(block)), int64(4*len(block)))
		for _, f := range block {
			w.buf = binary.LittleEndian.AppendUint32(w.buf, math.Float32bits(f))
		}
	}
	w.WriteBlockHeader(0, 0)
}
