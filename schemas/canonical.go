package schemas

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/offerlog/offerlog/third_party/forked/avro"
	"github.com/offerlog/offerlog/third_party/forked/avro/pkg/crc64"
)

// CanonicalForm returns the Parsing Canonical Form of s exactly as the Avro
// specification defines it ("Parsing Canonical Form for Schemas"): full
// names, primitives in their simple form, only the attributes the spec
// keeps (name, type, fields, symbols, items, values, size, in that order;
// logicalType, doc, default, aliases, namespace and the rest stripped), no
// whitespace. A named type is written in full at its first occurrence and
// by its full name after.
//
// hamba/avro's own canonical form keeps logicalType (and a decimal's
// precision and scale), so its fingerprints are not the spec's: a
// spec-following producer's records would carry another fingerprint than
// ours for every schema with a timestamp.
func CanonicalForm(s avro.Schema) string {
	var b strings.Builder
	canonical(&b, s, map[string]bool{})
	return b.String()
}

func canonical(b *strings.Builder, s avro.Schema, seen map[string]bool) {
	switch s := s.(type) {
	case *avro.RefSchema:
		canonical(b, s.Schema(), seen)
	case *avro.RecordSchema:
		if named(b, s.FullName(), seen) {
			return
		}
		typ := "record"
		if s.IsError() {
			typ = "error"
		}
		b.WriteString(`{"name":` + strconv.Quote(s.FullName()) + `,"type":"` + typ + `","fields":[`)
		for i, f := range s.Fields() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"name":` + strconv.Quote(f.Name()) + `,"type":`)
			canonical(b, f.Type(), seen)
			b.WriteByte('}')
		}
		b.WriteString("]}")
	case *avro.EnumSchema:
		if named(b, s.FullName(), seen) {
			return
		}
		b.WriteString(`{"name":` + strconv.Quote(s.FullName()) + `,"type":"enum","symbols":[`)
		for i, sym := range s.Symbols() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(sym))
		}
		b.WriteString("]}")
	case *avro.FixedSchema:
		if named(b, s.FullName(), seen) {
			return
		}
		b.WriteString(`{"name":` + strconv.Quote(s.FullName()) + `,"type":"fixed","size":` + strconv.Itoa(s.Size()) + "}")
	case *avro.ArraySchema:
		b.WriteString(`{"type":"array","items":`)
		canonical(b, s.Items(), seen)
		b.WriteByte('}')
	case *avro.MapSchema:
		b.WriteString(`{"type":"map","values":`)
		canonical(b, s.Values(), seen)
		b.WriteByte('}')
	case *avro.UnionSchema:
		b.WriteByte('[')
		for i, t := range s.Types() {
			if i > 0 {
				b.WriteByte(',')
			}
			canonical(b, t, seen)
		}
		b.WriteByte(']')
	default: // primitives and null: the simple form, whatever logical type they carry
		b.WriteString(`"` + string(s.Type()) + `"`)
	}
}

// named writes the full name of a named type already written and reports
// true, or marks it written and reports false.
func named(b *strings.Builder, full string, seen map[string]bool) bool {
	if seen[full] {
		b.WriteString(strconv.Quote(full))
		return true
	}
	seen[full] = true
	return false
}

// Fingerprint returns the CRC-64-AVRO (Rabin) fingerprint of s's Parsing
// Canonical Form: the one the Avro single-object encoding carries.
func Fingerprint(s avro.Schema) uint64 {
	h := crc64.New()
	_, _ = h.Write([]byte(CanonicalForm(s)))
	return h.Sum64()
}

// legacyFingerprint is the fingerprint offerlog wrote before v0.4.0: of
// hamba/avro's canonical form, which keeps logicalType.
func legacyFingerprint(s avro.Schema) (uint64, error) {
	fp, err := s.FingerprintUsing(avro.CRC64AvroLE)
	if err != nil {
		return 0, fmt.Errorf("legacy fingerprint: %w", err)
	}
	if len(fp) != 8 {
		return 0, fmt.Errorf("legacy fingerprint: %d bytes", len(fp))
	}
	var v uint64
	for i := 7; i >= 0; i-- { // little-endian
		v = v<<8 | uint64(fp[i])
	}
	return v, nil
}
