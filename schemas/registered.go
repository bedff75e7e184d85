package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/offerlog/offerlog/third_party/forked/avro"
)

// RegisteredSchemaName is the schema of a schemas.registered record.
const RegisteredSchemaName = "offerlog.schemas.RegisteredSchema"

// RegisteredSchema is a record of schemas.registered: a schema registered
// through the schema registry API, under its subject.
//
// A record whose Schema is empty sets a subject's compatibility level
// instead (its key config/<subject>; the subject "" sets the default).
type RegisteredSchema struct {
	Subject       string `avro:"subject" json:"subject"`
	Schema        string `avro:"schema" json:"schema"`
	Compatibility string `avro:"compatibility" json:"compatibility,omitempty"`
}

// The compatibility levels of the schema registry API, as Confluent's: what
// a new version of a subject must be to its earlier ones. BACKWARD, the
// default: it reads the latest version's data; FORWARD: the latest reads
// its data; FULL: both; the _TRANSITIVE levels: against every version;
// NONE: nothing. Whatever the level, offerlog's own processors must read
// the data it writes (the registry API checks that too).
var CompatibilityLevels = []string{"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"}

// DefaultCompatibility is the level of a subject no record set.
const DefaultCompatibility = "BACKWARD"

// Compatibilities are the compatibility levels of the schema registry
// API's subjects: a value its process owns, set through the API and
// followed from schemas.registered. The zero value holds none (every
// subject DefaultCompatibility). Safe for concurrent use.
type Compatibilities struct {
	mu     sync.RWMutex
	levels map[string]string // subject ("" the default) → level
}

// Set sets subject's level ("" the default of every subject); level ""
// removes it.
func (c *Compatibilities) Set(subject, level string) error {
	if level != "" && !slices.Contains(CompatibilityLevels, level) {
		return fmt.Errorf("schemas: no compatibility level %q (want one of %v)", level, CompatibilityLevels)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.levels == nil {
		c.levels = map[string]string{}
	}
	if level == "" {
		delete(c.levels, subject)
	} else {
		c.levels[subject] = level
	}
	return nil
}

// Of returns subject's level: its own, else the default set for every
// subject, else DefaultCompatibility.
func (c *Compatibilities) Of(subject string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if l, ok := c.levels[subject]; ok {
		return l
	}
	if l, ok := c.levels[""]; ok {
		return l
	}
	return DefaultCompatibility
}

// RegisteredSchemas is the codec of RegisteredSchema.
var RegisteredSchemas = codecFor[RegisteredSchema](RegisteredSchemaName)

// RegisteredRelease is the Release of a schema registered at run time
// through the schema registry API: a version a producer writes with, kept
// on the compacted topic schemas.registered and known to every process
// that follows it.
const RegisteredRelease = "registered"

// registerMu serialises Register: each makes a new catalog from the one
// before (readers never lock: load returns the catalog of the moment).
var registerMu sync.Mutex

// Register makes the schema of text, a self-contained Avro record schema as
// the registry API takes it, known to Writer, ByID, ByFingerprint and every
// codec (which resolve it against their own schema), and returns it. A
// schema known already is returned as it is. It does not decide whether
// the schema may be registered: the registry API does (Compatible).
func Register(text string) (*Schema, error) {
	sch, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("schemas: register: %w", err)
	}
	named, ok := sch.(avro.NamedSchema)
	if !ok || sch.Type() != avro.Record {
		return nil, errors.New("schemas: register: the top-level schema must be a named record")
	}
	raw, err := json.Marshal(sch)
	if err != nil {
		return nil, fmt.Errorf("schemas: register: %w", err)
	}
	s := &Schema{Name: named.FullName(), Release: RegisteredRelease, Avro: sch, Fingerprint: Fingerprint(sch),
		ID: RegistryID(string(raw)), Text: string(raw)}
	s.LegacyFingerprint = s.Fingerprint
	registerMu.Lock()
	defer registerMu.Unlock()
	c, err := load()
	if err != nil {
		return nil, err
	}
	if known, ok := c.byID[s.ID]; ok {
		return known, nil
	}
	if known, ok := c.byFP[s.Fingerprint]; ok && known.Name == s.Name {
		// The same canonical form: data headed with the fingerprint reads
		// the same; the new text gets its id.
		s.Avro = known.Avro
	}
	next := &catalog{current: c.current, released: c.released, byFP: maps.Clone(c.byFP), byID: maps.Clone(c.byID),
		registered: maps.Clone(c.registered)}
	if next.registered == nil {
		next.registered = map[string][]*Schema{}
	}
	next.registered[s.Name] = append(slices.Clone(next.registered[s.Name]), s)
	next.byID[s.ID] = s
	if _, ok := next.byFP[s.Fingerprint]; !ok {
		next.byFP[s.Fingerprint] = s
	}
	current.Store(next)
	return s, nil
}

// RegisteredVersions returns the schemas named name registered at run
// time, in the order they were registered.
func RegisteredVersions(name string) []*Schema {
	c, err := load()
	if err != nil {
		return nil
	}
	return c.registered[name]
}

// Compatible reports whether data written with writer can be read with
// reader (Avro schema resolution), with the reason it cannot.
func Compatible(reader, writer avro.Schema) error {
	return avro.NewSchemaCompatibility().Compatible(reader, writer)
}

// missHooks are called, in turn, before Writer answers that it does not
// know a schema, until one may have learnt registered schemas
// (AddMissHook).
var missHooks struct {
	sync.RWMutex
	next int
	fns  map[int]func() bool
}

// AddMissHook adds fn, which Writer calls when data names a schema it does
// not know; fn returns whether it may have learnt new schemas (Writer then
// looks again). A process that follows schemas.registered adds one that
// waits until it has read that topic to its end, so that a record written
// right after its schema's registration is not refused for a moment's lag,
// and removes it (the returned func) when it stops: several processes of
// one binary (tests) each have theirs. fn must bound its wait.
func AddMissHook(fn func() bool) (remove func()) {
	missHooks.Lock()
	defer missHooks.Unlock()
	if missHooks.fns == nil {
		missHooks.fns = map[int]func() bool{}
	}
	id := missHooks.next
	missHooks.next++
	missHooks.fns[id] = fn
	return func() {
		missHooks.Lock()
		delete(missHooks.fns, id)
		missHooks.Unlock()
	}
}

func missed() bool {
	missHooks.RLock()
	fns := slices.Collect(maps.Values(missHooks.fns))
	missHooks.RUnlock()
	for _, fn := range fns {
		if fn() {
			return true
		}
	}
	return false
}
