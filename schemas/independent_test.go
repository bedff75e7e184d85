package schemas

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
)

// An Avro binary decoder written from the specification's encoding rules,
// sharing nothing with hamba/avro: it reads a body with the writer's schema
// as JSON (the self-contained Text every schema carries, which is what a
// registry client gets), so that a test can check that what offerlog writes
// is what the specification says, read by another implementation.
type specDecoder struct {
	b     []byte
	named map[string]any // named types by full name and by name
}

var errShort = errors.New("body ends early")

func (d *specDecoder) long() (int64, error) {
	u, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errShort
	}
	d.b = d.b[n:]
	return int64(u>>1) ^ -int64(u&1), nil // zig-zag
}

func (d *specDecoder) take(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(d.b)) {
		return nil, errShort
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out, nil
}

func (d *specDecoder) value(schema any, ns string) (any, error) {
	switch s := schema.(type) {
	case string:
		switch s {
		case "null":
			return nil, nil
		case "boolean":
			b, err := d.take(1)
			if err != nil {
				return nil, err
			}
			return b[0] == 1, nil
		case "int", "long":
			return d.long()
		case "float":
			b, err := d.take(4)
			if err != nil {
				return nil, err
			}
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
		case "double":
			b, err := d.take(8)
			if err != nil {
				return nil, err
			}
			return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
		case "bytes", "string":
			n, err := d.long()
			if err != nil {
				return nil, err
			}
			b, err := d.take(n)
			if err != nil {
				return nil, err
			}
			if s == "string" {
				return string(b), nil
			}
			return b, nil
		}
		named, ok := d.named[s]
		if !ok {
			named, ok = d.named[ns+"."+s]
		}
		if !ok {
			return nil, fmt.Errorf("unknown type %q", s)
		}
		return d.value(named, ns)
	case []any: // union: the branch's index, then its value
		i, err := d.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(s)) {
			return nil, fmt.Errorf("union branch %d of %d", i, len(s))
		}
		return d.value(s[i], ns)
	case map[string]any:
		typ, _ := s["type"].(string)
		if name, ok := s["name"].(string); ok {
			if space, ok := s["namespace"].(string); ok {
				ns = space
			}
			d.named[name] = s
			d.named[ns+"."+name] = s
		}
		switch typ {
		case "record":
			out := map[string]any{}
			for _, f := range s["fields"].([]any) {
				f := f.(map[string]any)
				v, err := d.value(f["type"], ns)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", f["name"], err)
				}
				out[f["name"].(string)] = v
			}
			return out, nil
		case "enum":
			i, err := d.long()
			if err != nil {
				return nil, err
			}
			symbols := s["symbols"].([]any)
			if i < 0 || i >= int64(len(symbols)) {
				return nil, fmt.Errorf("enum index %d of %d", i, len(symbols))
			}
			return symbols[i], nil
		case "fixed":
			return d.take(int64(s["size"].(float64)))
		case "array", "map":
			var items []any
			m := map[string]any{}
			for {
				n, err := d.long()
				if err != nil {
					return nil, err
				}
				if n == 0 {
					break
				}
				if n < 0 { // a block with its size in bytes
					n = -n
					if _, err := d.long(); err != nil {
						return nil, err
					}
				}
				for range n {
					key := ""
					if typ == "map" {
						k, err := d.value("string", ns)
						if err != nil {
							return nil, err
						}
						key = k.(string)
					}
					elem := s["items"]
					if typ == "map" {
						elem = s["values"]
					}
					v, err := d.value(elem, ns)
					if err != nil {
						return nil, err
					}
					if typ == "map" {
						m[key] = v
					} else {
						items = append(items, v)
					}
				}
			}
			if typ == "map" {
				return m, nil
			}
			return items, nil
		default: // a primitive with attributes (logicalType ...)
			return d.value(typ, ns)
		}
	}
	return nil, fmt.Errorf("schema %v", schema)
}

// TestAnIndependentDecoderReadsWhatOfferlogWrites decodes a sample of every
// schema, as offerlog writes it (single-object encoding), with the decoder
// above: the header's fingerprint names the schema, the body is read
// whole, with no byte left over, and known values come out.
func TestAnIndependentDecoderReadsWhatOfferlogWrites(t *testing.T) {
	got := map[string]map[string]any{}
	for name, v := range samples() {
		framed := encodeAny(t, name, v)
		if len(framed) < 10 || framed[0] != 0xC3 || framed[1] != 0x01 {
			t.Fatalf("%s: not single-object encoded", name)
		}
		sch, err := Current(name)
		if err != nil {
			t.Fatal(err)
		}
		if fp := binary.LittleEndian.Uint64(framed[2:10]); fp != specFingerprint(t, sch.Text) {
			t.Errorf("%s: header fingerprint %x is not the spec's of its schema", name, fp)
		}
		var schema any
		if err := json.Unmarshal([]byte(sch.Text), &schema); err != nil {
			t.Fatal(err)
		}
		d := &specDecoder{b: framed[10:], named: map[string]any{}}
		out, err := d.value(schema, "")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(d.b) != 0 {
			t.Errorf("%s: %d bytes left after the body", name, len(d.b))
		}
		got[name] = out.(map[string]any)
	}
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Errorf("decoded %d schemas' samples, there are %d schemas", len(got), len(all))
	}
	for _, c := range []struct {
		schema, field string
		want          any
	}{
		{VerdictName, "reason", "older version"},
		{VerdictName, "verdict", "STALE"},
		{VerdictName, "source_offset", int64(9)},
		{DeadLetterName, "reason", "not framed"},
		{EpochSchemaName, "client", "shop"},
		{TokenName, "subject", "s1"},
	} {
		if v := got[c.schema][c.field]; v != c.want {
			t.Errorf("%s.%s = %v (%T), want %v", c.schema, c.field, v, v, c.want)
		}
	}
	if title := got[OfferEventName]["offer"].(map[string]any)["title"]; title == "" || title == nil {
		t.Errorf("OfferEvent.offer.title = %v", title)
	}
}

// specFingerprint is the spec's fingerprint of a schema's JSON text,
// computed by the independent canonical form of canonical_test.go.
func specFingerprint(t *testing.T, text string) uint64 {
	t.Helper()
	var root any
	if err := json.Unmarshal([]byte(text), &root); err != nil {
		t.Fatal(err)
	}
	spec := &specCanon{defs: map[string]map[string]any{}, ns: map[string]string{}, seen: map[string]bool{}}
	spec.collect(root, "")
	return rabin([]byte(spec.form(root, "")))
}
