package schemas

import (
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/offerlog/offerlog/third_party/forked/avro"
	"github.com/offerlog/offerlog/third_party/forked/avro/pkg/crc64"
	"github.com/offerlog/offerlog/third_party/forked/avro/soe"
)

//go:embed avro/*.avsc avro/types/*.avsc released/*/*.avsc released/*/types/*.avsc
var files embed.FS

// Names of the current schemas, as the full names of their records.
const (
	RawDocumentName      = "offerlog.documents.RawDocument"
	EpochSchemaName      = "offerlog.documents.EpochSchema"
	RegistryRecordName   = "offerlog.documents.RegistryRecord"
	VerdictName          = "offerlog.documents.Verdict"
	ExpiryCheckName      = "offerlog.documents.ExpiryCheck"
	FailedConversionName = "offerlog.documents.FailedConversion"
	DeadLetterName       = "offerlog.streams.DeadLetter"
	SaasDocumentName     = "offerlog.saas.SaasDocument"
	YtRecordName         = "offerlog.yt.YtRecord"
)

// Errors returned when decoding framed data.
var (
	// ErrNotFramed is returned when data does not start with the Avro
	// single-object marker C3 01 followed by an 8-byte fingerprint.
	ErrNotFramed = errors.New("schemas: data is not an Avro single-object encoding")
	// ErrUnknownSchema is returned when the writer's fingerprint names no
	// schema this binary knows, current or released.
	ErrUnknownSchema = errors.New("schemas: unknown writer schema fingerprint")
)

// Schema is one parsed Avro schema with where it came from.
type Schema struct {
	// Name is the full name of the top-level record.
	Name string
	// Release is "" for the current schema, or the release it was frozen in.
	Release string
	// Avro is the parsed schema.
	Avro avro.Schema
	// Fingerprint is the CRC-64-AVRO fingerprint of the Parsing Canonical
	// Form as the Avro specification defines it (CanonicalForm): the one
	// written in the single-object header.
	Fingerprint uint64
	// LegacyFingerprint is the one offerlog wrote before v0.4.0 (of a
	// canonical form that kept logicalType; equal to Fingerprint for a
	// schema without logical types). Data headed with it is still read:
	// see doc.go for how long.
	LegacyFingerprint uint64
	// ID is the schema's id in the schema registry API and in Confluent
	// framing (RegistryID of Text).
	ID int32
	// Text is the schema as self-contained JSON: docs, defaults and
	// logical types included, named types defined at first use.
	Text string
}

type catalog struct {
	current map[string]*Schema // by name
	byFP    map[uint64]*Schema
	byID    map[int32]*Schema
	// released[name] lists the released versions of a schema, oldest first.
	released map[string][]*Schema
	// registered[name] lists the versions registered at run time (Register).
	registered map[string][]*Schema
}

var (
	loadOnce sync.Once
	loadErr  error
	// current is the catalog of the moment: the embedded schemas, and those
	// registered since (Register makes a new one).
	current atomic.Pointer[catalog]
)

func load() (*catalog, error) {
	loadOnce.Do(func() {
		c, err := parseAll()
		current.Store(c)
		loadErr = err
	})
	if loadErr != nil {
		return nil, loadErr
	}
	return current.Load(), nil
}

func parseAll() (*catalog, error) {
	c := &catalog{
		current:  map[string]*Schema{},
		byFP:     map[uint64]*Schema{},
		byID:     map[int32]*Schema{},
		released: map[string][]*Schema{},
	}
	var errs []error
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".avsc") || path.Base(path.Dir(p)) == typesDir {
			return err
		}
		release := ""
		if strings.HasPrefix(p, "released/") {
			release = strings.Split(p, "/")[1]
		}
		s, err := parseFile(p, release)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if release == "" {
			if _, dup := c.current[s.Name]; dup {
				errs = append(errs, fmt.Errorf("schemas: %s defined twice", s.Name))
			}
			c.current[s.Name] = s
		} else {
			c.released[s.Name] = append(c.released[s.Name], s)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	for _, rs := range c.released {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Release < rs[j].Release })
	}
	// Both fingerprints of every schema resolve. Spec fingerprints win over
	// legacy ones, and current schemas over identical released ones.
	var all []*Schema
	for _, rs := range c.released {
		all = append(all, rs...)
	}
	for _, s := range c.current {
		all = append(all, s)
	}
	for _, s := range all {
		c.byFP[s.LegacyFingerprint] = s
	}
	for _, s := range all {
		if prev, ok := c.byFP[s.Fingerprint]; !ok || prev.Fingerprint != s.Fingerprint || s.Release == "" {
			c.byFP[s.Fingerprint] = s
		}
		if prev, ok := c.byID[s.ID]; ok && prev.Text != s.Text {
			errs = append(errs, fmt.Errorf("schemas: %s and %s share registry id %d", prev.Name, s.Name, s.ID))
		}
		if prev, ok := c.byID[s.ID]; !ok || s.Release == "" || prev.Release > s.Release {
			c.byID[s.ID] = s
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// typesDir is the folder, beside the schemas of a tree, of the named types
// they share (the offer, for instance). Its files are not schemas of their
// own: each schema using them carries their definition in its canonical form.
const typesDir = "types"

func parseFile(p, release string) (*Schema, error) {
	raw, err := files.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("schemas: read %s: %w", p, err)
	}
	// Each file is parsed in a cache of its own so that released and current
	// versions of a named type do not collide; the shared types of its tree
	// (types/, in file name order) are parsed into that cache first.
	cache := &avro.SchemaCache{}
	shared := path.Join(path.Dir(p), typesDir)
	entries, _ := fs.ReadDir(files, shared) // a tree without shared types has no such folder
	for _, e := range entries {
		t, err := files.ReadFile(path.Join(shared, e.Name()))
		if err == nil {
			_, err = avro.ParseBytesWithCache(t, "", cache)
		}
		if err != nil {
			return nil, fmt.Errorf("schemas: shared type %s for %s: %w", e.Name(), p, err)
		}
	}
	sch, err := avro.ParseBytesWithCache(raw, "", cache)
	if err != nil {
		return nil, fmt.Errorf("schemas: parse %s: %w", p, err)
	}
	named, ok := sch.(avro.NamedSchema)
	if !ok {
		return nil, fmt.Errorf("schemas: %s: top-level schema must be a named record", path.Base(p))
	}
	legacy, err := legacyFingerprint(sch)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", p, err)
	}
	text, err := json.Marshal(sch)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s as JSON: %w", p, err)
	}
	return &Schema{Name: named.FullName(), Release: release, Avro: sch, Fingerprint: Fingerprint(sch), LegacyFingerprint: legacy,
		ID: RegistryID(string(text)), Text: string(text)}, nil
}

// Current returns the current schema named name (a full record name such as
// RawDocumentName). It returns an error if the name is unknown or the
// embedded schemas fail to parse. Safe for concurrent use.
func Current(name string) (*Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	s, ok := c.current[name]
	if !ok {
		return nil, fmt.Errorf("schemas: no schema named %q", name)
	}
	return s, nil
}

// Released returns every released version of the schema named name, oldest
// first. Safe for concurrent use.
func Released(name string) ([]*Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	return c.released[name], nil
}

// All returns every current schema, sorted by name.
func All() ([]*Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	out := make([]*Schema, 0, len(c.current))
	for _, s := range c.current {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Writer returns the schema that heads data, and the Avro body after the
// header: data is single-object encoded (C3 01 and the fingerprint) or in
// Confluent's framing (a zero byte and the 4-byte big-endian registry id,
// as Confluent's serializers write with a schema of the registry API). It
// returns ErrNotFramed or ErrUnknownSchema (wrapped).
func Writer(data []byte) (*Schema, []byte, error) {
	c, err := load()
	if err != nil {
		return nil, nil, err
	}
	if len(data) >= 5 && data[0] == 0 {
		id := int32(binary.BigEndian.Uint32(data[1:5]))
		s, ok := c.byID[id]
		if !ok && missed() {
			s, ok = current.Load().byID[id]
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w: registry id %d", ErrUnknownSchema, id)
		}
		return s, data[5:], nil
	}
	fp, body, err := soe.ParseHeader(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotFramed, err)
	}
	s, ok := c.byFP[binary.LittleEndian.Uint64(fp)]
	if !ok && missed() {
		s, ok = current.Load().byFP[binary.LittleEndian.Uint64(fp)]
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: %x", ErrUnknownSchema, fp)
	}
	return s, body, nil
}

// Frame returns data framed for schema s: C3 01, the fingerprint, body.
func Frame(s *Schema, body []byte) []byte {
	return append(appendSOEHeader(make([]byte, 0, 10+len(body)), s), body...)
}

// appendSOEHeader appends the single-object encoding's header for s to
// dst: C3 01 and the fingerprint.
func appendSOEHeader(dst []byte, s *Schema) []byte {
	return binary.LittleEndian.AppendUint64(append(dst, 0xC3, 0x01), s.Fingerprint)
}

// RegistryID is the registry id of a schema's JSON text: the low 31 bits
// of its CRC-64-AVRO, with bit 24 set so that no small id a client guesses
// names one; a positive int32, as Confluent's clients expect. Derived from
// the text, it is the same on every instance and after every restart.
func RegistryID(text string) int32 {
	h := crc64.New()
	_, _ = h.Write([]byte(text))
	return int32(h.Sum64()&0x7fffffff) | 1<<24
}

// ByID returns the schema with registry id id, or ErrUnknownSchema.
func ByID(id int32) (*Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	s, ok := c.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: registry id %d", ErrUnknownSchema, id)
	}
	return s, nil
}

// FrameConfluent returns body in Confluent's framing for s: a zero byte,
// s's registry id (4 bytes, big-endian), body.
func FrameConfluent(s *Schema, body []byte) []byte {
	return append(appendConfluentHeader(make([]byte, 0, 5+len(body)), s), body...)
}

// appendConfluentHeader appends Confluent's header for s to dst: a zero
// byte and the registry id.
func appendConfluentHeader(dst []byte, s *Schema) []byte {
	return binary.BigEndian.AppendUint32(append(dst, 0), uint32(s.ID))
}

// ByFingerprint returns the schema with fingerprint fp (spec or legacy),
// or ErrUnknownSchema.
func ByFingerprint(fp uint64) (*Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	s, ok := c.byFP[fp]
	if !ok {
		return nil, fmt.Errorf("%w: %016x", ErrUnknownSchema, fp)
	}
	return s, nil
}
