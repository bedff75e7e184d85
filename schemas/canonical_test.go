package schemas

import (
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file computes the Parsing Canonical Form and the CRC-64-AVRO
// fingerprint of every schema file again, from the Avro specification's
// rules applied to the files' JSON, without hamba/avro, and compares them
// with what the package writes.

// specPrimitives are the Avro primitive type names.
var specPrimitives = map[string]bool{"null": true, "boolean": true, "int": true, "long": true, "float": true,
	"double": true, "bytes": true, "string": true}

// specCanon holds the named types a schema may refer to (its own, and those
// of its tree's types/ folder) and the ones already written.
type specCanon struct {
	defs map[string]map[string]any // full name -> definition
	ns   map[string]string         // full name -> namespace its definition is in
	seen map[string]bool
}

// fullName applies the spec's FULLNAMES rule: a name with a dot is full;
// otherwise it is in the namespace attribute or the enclosing one.
func fullName(name, namespace string) string {
	if strings.Contains(name, ".") || namespace == "" {
		return name
	}
	return namespace + "." + name
}

// collect records every named type defined in node (enclosing namespace ns).
func (c *specCanon) collect(node any, ns string) {
	switch n := node.(type) {
	case []any:
		for _, x := range n {
			c.collect(x, ns)
		}
	case map[string]any:
		typ, _ := n["type"].(string)
		switch typ {
		case "record", "error", "enum", "fixed":
			name, _ := n["name"].(string)
			if explicit, ok := n["namespace"].(string); ok {
				ns = explicit
			}
			full := fullName(name, ns)
			if i := strings.LastIndex(full, "."); i >= 0 {
				ns = full[:i]
			}
			c.defs[full], c.ns[full] = n, ns
			if fields, ok := n["fields"].([]any); ok {
				for _, f := range fields {
					if fm, ok := f.(map[string]any); ok {
						c.collect(fm["type"], ns)
					}
				}
			}
		case "array":
			c.collect(n["items"], ns)
		case "map":
			c.collect(n["values"], ns)
		default:
			c.collect(n["type"], ns)
		}
	}
}

func quote(s string) string { return `"` + s + `"` }

// form writes node's canonical form (enclosing namespace ns).
func (c *specCanon) form(node any, ns string) string {
	switch n := node.(type) {
	case string:
		if specPrimitives[n] {
			return quote(n)
		}
		full := fullName(n, ns)
		if c.seen[full] {
			return quote(full)
		}
		def, ok := c.defs[full]
		if !ok {
			return "UNKNOWN " + full
		}
		return c.form(def, c.ns[full])
	case []any:
		parts := make([]string, len(n))
		for i, x := range n {
			parts[i] = c.form(x, ns)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		switch typ := n["type"].(type) {
		case string:
			switch typ {
			case "record", "error", "enum", "fixed":
				name, _ := n["name"].(string)
				if explicit, ok := n["namespace"].(string); ok {
					ns = explicit
				}
				full := fullName(name, ns)
				if c.seen[full] {
					return quote(full)
				}
				c.seen[full] = true
				if i := strings.LastIndex(full, "."); i >= 0 {
					ns = full[:i]
				}
				out := `{"name":` + quote(full) + `,"type":` + quote(typ)
				switch typ {
				case "enum":
					var syms []string
					for _, s := range n["symbols"].([]any) {
						syms = append(syms, quote(s.(string)))
					}
					return out + `,"symbols":[` + strings.Join(syms, ",") + "]}"
				case "fixed":
					return out + `,"size":` + strconv.Itoa(int(n["size"].(float64))) + "}"
				}
				var fields []string
				for _, f := range n["fields"].([]any) {
					fm := f.(map[string]any)
					fields = append(fields, `{"name":`+quote(fm["name"].(string))+`,"type":`+c.form(fm["type"], ns)+"}")
				}
				return out + `,"fields":[` + strings.Join(fields, ",") + "]}"
			case "array":
				return `{"type":"array","items":` + c.form(n["items"], ns) + "}"
			case "map":
				return `{"type":"map","values":` + c.form(n["values"], ns) + "}"
			default: // a primitive in object form, logicalType and all: its simple form
				return c.form(typ, ns)
			}
		default:
			return c.form(typ, ns)
		}
	}
	return "UNEXPECTED"
}

// rabin is the spec's CRC-64-AVRO fingerprint ("Schema Fingerprints").
func rabin(buf []byte) uint64 {
	const empty uint64 = 0xc15d213aa4d7a795
	var table [256]uint64
	for i := range table {
		fp := uint64(i)
		for range 8 {
			fp = (fp >> 1) ^ (empty & -(fp & 1))
		}
		table[i] = fp
	}
	fp := empty
	for _, b := range buf {
		fp = (fp >> 8) ^ table[byte(fp)^b]
	}
	return fp
}

func readJSON(t *testing.T, p string) any {
	t.Helper()
	raw, err := files.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return v
}

func TestCanonicalFormAndFingerprintFollowTheSpec(t *testing.T) {
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	byRelease := map[string]map[string]*Schema{}
	for _, s := range c.current {
		byRelease[""] = addTo(byRelease[""], s)
	}
	for _, rs := range c.released {
		for _, s := range rs {
			byRelease[s.Release] = addTo(byRelease[s.Release], s)
		}
	}
	checked, differ := 0, 0
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".avsc") || path.Base(path.Dir(p)) == typesDir {
			return err
		}
		release := ""
		if strings.HasPrefix(p, "released/") {
			release = strings.Split(p, "/")[1]
		}
		spec := &specCanon{defs: map[string]map[string]any{}, ns: map[string]string{}, seen: map[string]bool{}}
		shared, _ := fs.ReadDir(files, path.Join(path.Dir(p), typesDir))
		names := make([]string, 0, len(shared))
		for _, e := range shared {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, name := range names {
			spec.collect(readJSON(t, path.Join(path.Dir(p), typesDir, name)), "")
		}
		root := readJSON(t, p)
		spec.collect(root, "")
		want := spec.form(root, "")

		top := root.(map[string]any)
		full := fullName(top["name"].(string), stringOr(top["namespace"]))
		s := byRelease[release][full]
		if s == nil {
			t.Errorf("%s: no schema %s loaded", p, full)
			return nil
		}
		if got := CanonicalForm(s.Avro); got != want {
			t.Errorf("%s: canonical form\n got %s\nwant %s", p, got, want)
		}
		if s.Fingerprint != rabin([]byte(want)) {
			t.Errorf("%s: fingerprint %x, the spec's %x", p, s.Fingerprint, rabin([]byte(want)))
		}
		// The header carries it little-endian.
		if h := Frame(s, nil); binary.LittleEndian.Uint64(h[2:10]) != rabin([]byte(want)) {
			t.Errorf("%s: header % x", p, h)
		}
		for _, banned := range []string{`"logicalType":`, `"doc":`, `"default":`, `"aliases":`, `"namespace":`, " "} {
			if strings.Contains(want, banned) {
				t.Errorf("%s: the spec's form keeps %q: %s", p, banned, want)
			}
		}
		if s.Fingerprint != s.LegacyFingerprint {
			differ++
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 32 || differ == 0 {
		t.Fatalf("checked %d schema files, %d with a legacy fingerprint of their own", checked, differ)
	}
	t.Logf("%d schema files, %d of them with logical types (their fingerprint changed)", checked, differ)
}

func addTo(m map[string]*Schema, s *Schema) map[string]*Schema {
	if m == nil {
		m = map[string]*Schema{}
	}
	m[s.Name] = s
	return m
}

func stringOr(v any) string {
	s, _ := v.(string)
	return s
}

// TestSpecVectors checks the independent implementation itself against
// fingerprints published with the specification's test data
// (share/test/data/schema-tests.txt in the Avro repository).
func TestSpecVectors(t *testing.T) {
	for _, v := range []struct {
		canonical string
		fp        int64
	}{
		{`"null"`, 7195948357588979594},
		{`"boolean"`, -6970731678124411036},
		{`"int"`, 8247732601305521295},
		{`"long"`, -3434872931120570953},
		{`"float"`, 5583340709985441680},
		{`"double"`, -8181574048448539266},
		{`"bytes"`, 5746618253357095269},
		{`"string"`, -8142146995180207161},
		{`[]`, -1241056759729112623},
		{`["int"]`, -5232228896498058493},
		{`["int","boolean"]`, 5392556393470105090},
		{`{"name":"foo","type":"record","fields":[]}`, -4824392279771201922},
		{`{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"},{"name":"f2","type":"int"}]}`, -4860222112080293046},
	} {
		if got := int64(rabin([]byte(v.canonical))); got != v.fp {
			t.Errorf("%s: %d, the spec's test data %d", v.canonical, got, v.fp)
		}
	}
}

// TestLegacyFingerprintsStillResolve: data written before v0.4.0, headed
// with the old fingerprint, decodes as before.
func TestLegacyFingerprintsStillResolve(t *testing.T) {
	s, err := Current(VerdictName)
	if err != nil {
		t.Fatal(err)
	}
	if s.LegacyFingerprint == s.Fingerprint {
		t.Skip("the verdict schema has no logical type")
	}
	data, err := Verdicts.Encode(&Verdict{Client: "c", PK: "p", Verdict: Accepted, Timestamp: time.UnixMilli(1)})
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(data[2:10], s.LegacyFingerprint)
	var v Verdict
	if err := Verdicts.Decode(data, &v); err != nil || v.PK != "p" {
		t.Fatalf("legacy-headed verdict: %+v %v", v, err)
	}
}
