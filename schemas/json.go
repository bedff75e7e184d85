package schemas

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/offerlog/offerlog/third_party/forked/avro"
)

// EncodeJSON encodes a JSON value (as decoded by encoding/json with
// UseNumber) into framed Avro with schema s. It is strict: unknown record
// fields, missing fields without a default, wrong types and out-of-range
// numbers are errors naming the path at fault, and nothing is returned.
//
// Timestamps (timestamp-millis) are RFC 3339 strings or integer milliseconds;
// bytes are base64 strings; a nullable union takes the value or null, and any
// union also takes Avro's JSON form {"branch": value}.
func EncodeJSON(s *Schema, v any) ([]byte, error) {
	native, err := fromJSON(s.Avro, v, "")
	if err != nil {
		return nil, err
	}
	body, err := avro.Marshal(s.Avro, native)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.Name, err)
	}
	return Frame(s, body), nil
}

// DecodeJSON decodes framed Avro data with its writer's schema and returns
// the writer's schema and a JSON-ready value in the form EncodeJSON takes,
// so the output of one can be fed to the other.
func DecodeJSON(data []byte) (*Schema, any, error) {
	w, body, err := Writer(data)
	if err != nil {
		return nil, nil, err
	}
	var native any
	if err := unmarshalAll(w.Avro, body, &native); err != nil {
		return w, nil, fmt.Errorf("decode %s: %w", w.Name, err)
	}
	return w, toJSON(w.Avro, native), nil
}

// ParseJSON decodes one JSON document keeping numbers exact, as EncodeJSON
// expects.
func ParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func at(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func fromJSON(s avro.Schema, v any, path string) (any, error) {
	where := path
	if where == "" {
		where = "value"
	}
	switch s := s.(type) {
	case *avro.RecordSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an object for record %s, got %s", where, s.Name(), kind(v))
		}
		known := make(map[string]bool, len(s.Fields()))
		out := make(map[string]any, len(s.Fields()))
		for _, f := range s.Fields() {
			known[f.Name()] = true
			fv, present := obj[f.Name()]
			if !present {
				if !f.HasDefault() {
					return nil, fmt.Errorf("%s: missing required field", at(path, f.Name()))
				}
				out[f.Name()] = defaultNative(f.Type(), f.Default())
				continue
			}
			nv, err := fromJSON(f.Type(), fv, at(path, f.Name()))
			if err != nil {
				return nil, err
			}
			out[f.Name()] = nv
		}
		var unknown []string
		for k := range obj {
			if !known[k] {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return nil, fmt.Errorf("%s: unknown field(s) %s in record %s", where, strings.Join(unknown, ", "), s.Name())
		}
		return out, nil
	case *avro.ArraySchema:
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an array, got %s", where, kind(v))
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			nv, err := fromJSON(s.Items(), e, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	case *avro.MapSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an object for a map, got %s", where, kind(v))
		}
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			nv, err := fromJSON(s.Values(), e, at(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = nv
		}
		return out, nil
	case *avro.EnumSchema:
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want one of %s, got %s", where, strings.Join(s.Symbols(), "|"), kind(v))
		}
		for _, sym := range s.Symbols() {
			if sym == str {
				return str, nil
			}
		}
		return nil, fmt.Errorf("%s: %q is not one of %s", where, str, strings.Join(s.Symbols(), "|"))
	case *avro.UnionSchema:
		return unionFromJSON(s, v, path, where)
	case *avro.PrimitiveSchema:
		return primitiveFromJSON(s, v, where)
	case *avro.RefSchema:
		return fromJSON(s.Schema(), v, path)
	}
	return nil, fmt.Errorf("%s: schema type %s is not supported in JSON", where, s.Type())
}

func unionFromJSON(s *avro.UnionSchema, v any, path, where string) (any, error) {
	if v == nil {
		if s.Nullable() {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: null is not allowed", where)
	}
	// Avro's JSON form: {"branch": value}.
	if obj, ok := v.(map[string]any); ok && len(obj) == 1 {
		for name, inner := range obj {
			for _, b := range s.Types() {
				if branchName(b) == name {
					nv, err := fromJSON(b, inner, path)
					return wrapBranch(b, nv), err
				}
			}
		}
	}
	var errs []string
	for _, b := range s.Types() {
		if b.Type() == avro.Null {
			continue
		}
		nv, err := fromJSON(b, v, path)
		if err == nil {
			return wrapBranch(b, nv), nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("%s: value fits no branch of the union: %s", where, strings.Join(errs, "; "))
}

// wrapBranch returns a union's native value for avro.Marshal: a record or
// map is given as {"branch": value}, for a bare map would be taken as that.
func wrapBranch(b avro.Schema, v any) any {
	if r, ok := b.(*avro.RefSchema); ok {
		b = r.Schema()
	}
	switch b.(type) {
	case *avro.RecordSchema, *avro.MapSchema:
		return map[string]any{branchName(b): v}
	}
	return v
}

func branchName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

func primitiveFromJSON(s *avro.PrimitiveSchema, v any, where string) (any, error) {
	if ls := s.Logical(); ls != nil && s.Type() == avro.Long &&
		(ls.Type() == avro.TimestampMillis || ls.Type() == avro.TimestampMicros) {
		switch t := v.(type) {
		case string:
			ts, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return nil, fmt.Errorf("%s: want an RFC 3339 time: %w", where, err)
			}
			return ts.UTC(), nil
		case json.Number:
			n, err := t.Int64()
			if err != nil {
				return nil, fmt.Errorf("%s: want integer milliseconds or an RFC 3339 time, got %s", where, t)
			}
			if ls.Type() == avro.TimestampMicros {
				return time.UnixMicro(n).UTC(), nil
			}
			return time.UnixMilli(n).UTC(), nil
		}
		return nil, fmt.Errorf("%s: want an RFC 3339 time, got %s", where, kind(v))
	}
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return nil, fmt.Errorf("%s: want null, got %s", where, kind(v))
		}
		return nil, nil
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%s: want a boolean, got %s", where, kind(v))
		}
		return b, nil
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a string, got %s", where, kind(v))
		}
		return str, nil
	case avro.Bytes:
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want base64 bytes, got %s", where, kind(v))
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			return nil, fmt.Errorf("%s: want base64 bytes: %w", where, err)
		}
		return b, nil
	case avro.Int, avro.Long:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: want an integer, got %s", where, kind(v))
		}
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("%s: want an integer, got %s", where, n)
		}
		if s.Type() == avro.Int {
			if i < math.MinInt32 || i > math.MaxInt32 {
				return nil, fmt.Errorf("%s: %d does not fit a 32-bit int", where, i)
			}
			return int(i), nil
		}
		return i, nil
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: want a number, got %s", where, kind(v))
		}
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: want a number, got %s", where, n)
		}
		if s.Type() == avro.Float {
			return float32(f), nil
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s: schema type %s is not supported in JSON", where, s.Type())
}

// defaultNative turns a field default (as hamba keeps it) into a value
// avro.Marshal accepts for the field's schema.
func defaultNative(s avro.Schema, d any) any {
	if d == nil {
		return nil
	}
	switch s := s.(type) {
	case *avro.UnionSchema:
		return defaultNative(s.Types()[0], d)
	case *avro.ArraySchema:
		if arr, ok := d.([]any); ok {
			return arr
		}
		return []any{}
	case *avro.PrimitiveSchema:
		if ls := s.Logical(); ls != nil && s.Type() == avro.Long {
			if n, ok := d.(int64); ok {
				return time.UnixMilli(n).UTC()
			}
		}
	}
	return d
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func toJSON(s avro.Schema, v any) any {
	switch s := s.(type) {
	case *avro.RecordSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(obj))
		for _, f := range s.Fields() {
			out[f.Name()] = toJSON(f.Type(), obj[f.Name()])
		}
		return out
	case *avro.ArraySchema:
		arr, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = toJSON(s.Items(), e)
		}
		return out
	case *avro.MapSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			out[k] = toJSON(s.Values(), e)
		}
		return out
	case *avro.UnionSchema:
		if v == nil {
			return nil
		}
		if obj, ok := v.(map[string]any); ok && len(obj) == 1 {
			for name, inner := range obj {
				for _, b := range s.Types() {
					if branchName(b) == name {
						return toJSON(b, inner)
					}
				}
			}
		}
		for _, b := range s.Types() {
			if b.Type() != avro.Null {
				return toJSON(b, v)
			}
		}
		return v
	case *avro.RefSchema:
		return toJSON(s.Schema(), v)
	case *avro.PrimitiveSchema:
		switch t := v.(type) {
		case time.Time:
			return t.UTC().Format(time.RFC3339Nano)
		case []byte:
			return base64.StdEncoding.EncodeToString(t)
		case float64:
			if math.IsNaN(t) || math.IsInf(t, 0) {
				return fmt.Sprint(t)
			}
		case float32:
			if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
				return fmt.Sprint(t)
			}
		}
	}
	return v
}
