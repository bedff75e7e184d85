package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/offerlog/offerlog/third_party/forked/avro"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// The schema registry API: the Confluent Schema Registry REST API's read
// side, its schema lookup and its registration of known or compatible
// schemas, under /schema-registry, over the schemas this binary carries.
// Subjects follow TopicNameStrategy: "<topic>-value" for every topic whose
// values are Avro (keys are plain strings: there are no "-key" subjects).
// A subject's versions are its schema's releases in order, then the current
// schema, consecutive identical ones (the same schema text: defaults and
// docs count, as for Confluent's registry) counted once. A schema's id is
// derived from its text, so every instance and every restart answers the
// same id without coordination.

// SubjectVersion is one version of a subject, as the registry API answers.
type SubjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int32  `json:"id"`
	Schema  string `json:"schema"`
}

// RegistryError is the body of the registry API's error answers, with
// Confluent's error codes.
type RegistryError struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// Confluent's error codes the registry API answers.
const (
	codeSubjectNotFound = 40401
	codeVersionNotFound = 40402
	codeSchemaNotFound  = 40403
	codeIncompatible    = 409
	// codeInvalidCompatibility is Confluent's code of an unknown level.
	codeInvalidCompatibility = 42203
	codeInvalidSchema        = 42201
	codeInvalidVersion       = 42202
)

// subjectIndex is the registry's view of the catalogue, built once.
type subjectIndex struct {
	subjects map[string][]*schemas.Schema // "<topic>-value" -> versions, oldest first
}

var (
	indexOnce sync.Once
	index     *subjectIndex
	indexErr  error
)

func registryIndex() (*subjectIndex, error) {
	indexOnce.Do(func() { index, indexErr = buildIndex(topics.Catalogue(1)) })
	return index, indexErr
}

func buildIndex(catalogue []topics.Topic) (*subjectIndex, error) {
	idx := &subjectIndex{subjects: map[string][]*schemas.Schema{}}
	versionsOf := map[string][]*schemas.Schema{}
	for _, t := range catalogue {
		if t.Schema == "" {
			continue
		}
		vs, ok := versionsOf[t.Schema]
		if !ok {
			var err error
			if vs, err = idx.versions(t.Schema); err != nil {
				return nil, err
			}
			versionsOf[t.Schema] = vs
		}
		idx.subjects[t.Name+"-value"] = vs
	}
	return idx, nil
}

// versions returns the distinct versions of the schema named name, oldest
// first.
func (idx *subjectIndex) versions(name string) ([]*schemas.Schema, error) {
	released, err := schemas.Released(name)
	if err != nil {
		return nil, err
	}
	cur, err := schemas.Current(name)
	if err != nil {
		return nil, err
	}
	var out []*schemas.Schema
	for _, s := range append(slices.Clone(released), cur) {
		if len(out) == 0 || out[len(out)-1].Text != s.Text {
			out = append(out, s)
		}
	}
	return out, nil
}

// subject returns the versions of subject, for the catalogue's topics and
// the per-client and per-stage ones.
func (idx *subjectIndex) subject(subject string) ([]*schemas.Schema, bool) {
	vs, ok := idx.builtIn(subject)
	if !ok || len(vs) == 0 {
		return vs, ok
	}
	// Then the versions registered through this API, in their order.
	out := slices.Clone(vs)
	for _, r := range schemas.RegisteredVersions(vs[0].Name) {
		if !slices.ContainsFunc(out, func(s *schemas.Schema) bool { return s.ID == r.ID }) {
			out = append(out, r)
		}
	}
	return out, true
}

// builtIn returns the versions of subject offerlog was built with.
func (idx *subjectIndex) builtIn(subject string) ([]*schemas.Schema, bool) {
	if vs, ok := idx.subjects[subject]; ok {
		return vs, true
	}
	topic, ok := strings.CutSuffix(subject, "-value")
	if !ok {
		return nil, false
	}
	name, ok := topics.SchemaFor(topic)
	if !ok {
		return nil, false
	}
	for _, vs := range idx.subjects {
		if len(vs) > 0 && vs[0].Name == name {
			return vs, true
		}
	}
	vs, err := idx.versions(name)
	return vs, err == nil
}

// version picks a version of vs: "latest", or 1.., or -1 (latest).
func version(vs []*schemas.Schema, v string) (int, *RegistryError) {
	if v == "latest" || v == "-1" {
		return len(vs), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, &RegistryError{Code: codeInvalidVersion, Message: fmt.Sprintf("The specified version '%s' is not a valid version id. "+
			"Allowed values are between [1, 2^31-1] and the string \"latest\"", v)}
	}
	if n > len(vs) {
		return 0, &RegistryError{Code: codeVersionNotFound, Message: fmt.Sprintf("Version %d not found.", n)}
	}
	return n, nil
}

// lookup finds a submitted schema among vs: the version with the same
// text (once parsed: whitespace and attribute order do not count), else the
// latest with the same spec canonical form; 0 for none.
func lookup(vs []*schemas.Schema, s avro.Schema) int {
	if raw, err := json.Marshal(s); err == nil {
		for i, rs := range vs {
			if rs.Text == string(raw) {
				return i + 1
			}
		}
	}
	fp := schemas.Fingerprint(s)
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Fingerprint == fp {
			return i + 1
		}
	}
	return 0
}

// parseSubmitted parses a schema a client submits: self-contained, as
// Confluent's serializers send it (references are not supported).
func parseSubmitted(text string) (avro.Schema, *RegistryError) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, &RegistryError{Code: codeInvalidSchema, Message: "Invalid schema: " + err.Error()}
	}
	return s, nil
}

// registerable decides a registration: the version the schema already is
// (then it is answered with its id), or, for a new schema, whether it is
// compatible both ways with the latest version (readers of either read the
// other's data: FULL, which is BACKWARD and more) and the current schema
// offerlog's processors read with can read its data (else they would
// dead-letter every record written with it). It returns 0 and no error for
// a new schema to register.
func registerable(vs []*schemas.Schema, s avro.Schema, level string) (int, *RegistryError) {
	if v := lookup(vs, s); v > 0 {
		return v, nil
	}
	incompatible := func(what string, err error) *RegistryError {
		return &RegistryError{Code: codeIncompatible, Message: fmt.Sprintf(
			"Schema being registered is incompatible with an earlier schema for subject (compatibility %s): %s: %v", level, what, err)}
	}
	against := vs[len(vs)-1:]
	if strings.HasSuffix(level, "_TRANSITIVE") {
		against = vs
	}
	backward := strings.HasPrefix(level, "BACKWARD") || strings.HasPrefix(level, "FULL")
	forward := strings.HasPrefix(level, "FORWARD") || strings.HasPrefix(level, "FULL")
	for i := len(against) - 1; i >= 0; i-- {
		v := against[i]
		if backward {
			if err := schemas.Compatible(s, v.Avro); err != nil {
				return 0, incompatible(fmt.Sprintf("it cannot read the data of version %d (backward)", slices.Index(vs, v)+1), err)
			}
		}
		if forward {
			if err := schemas.Compatible(v.Avro, s); err != nil {
				return 0, incompatible(fmt.Sprintf("version %d cannot read its data (forward)", slices.Index(vs, v)+1), err)
			}
		}
	}
	// Whatever the level: offerlog's processors read the topic.
	if cur, err := schemas.Current(vs[len(vs)-1].Name); err == nil {
		if err := schemas.Compatible(cur.Avro, s); err != nil {
			return 0, incompatible("offerlog's processors cannot read its data", err)
		}
	}
	return 0, nil
}

func writeRegistry(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func registryErr(w http.ResponseWriter, status int, e *RegistryError) { writeRegistry(w, status, e) }

func (s *Server) routeSchemaRegistry() {
	const root = "/schema-registry"
	s.route("GET "+root+"/subjects", anyToken, s.srSubjects)
	s.route("GET "+root+"/subjects/{subject}/versions", anyToken, s.srVersions)
	s.route("GET "+root+"/subjects/{subject}/versions/{version}", anyToken, s.srVersion)
	s.route("GET "+root+"/subjects/{subject}/versions/{version}/schema", anyToken, s.srVersionSchema)
	s.route("GET "+root+"/schemas/ids/{id}", anyToken, s.srSchemaByID)
	s.route("GET "+root+"/schemas/ids/{id}/schema", anyToken, s.srSchemaByID)
	s.route("GET "+root+"/schemas/ids/{id}/versions", anyToken, s.srSchemaVersions)
	s.route("GET "+root+"/schemas/types", anyToken, func(w http.ResponseWriter, _ *http.Request) {
		writeRegistry(w, http.StatusOK, []string{"AVRO"})
	})
	s.route("GET "+root+"/config", anyToken, func(w http.ResponseWriter, _ *http.Request) {
		writeRegistry(w, http.StatusOK, map[string]string{"compatibilityLevel": s.compat.Of("")})
	})
	s.route("PUT "+root+"/config", adminOnly, s.srSetConfig)
	s.route("PUT "+root+"/config/{subject}", adminOnly, s.srSetConfig)
	s.route("GET "+root+"/config/{subject}", anyToken, s.srConfig)
	s.route("POST "+root+"/subjects/{subject}", anyToken, s.srLookup)
	s.route("POST "+root+"/subjects/{subject}/versions", adminOnly, s.srRegister)
	s.route("GET /v1/schemas/{fingerprint}", anyToken, s.schemaByFingerprint)
}

// srIndex returns the index, or answers 500.
func srIndex(w http.ResponseWriter) *subjectIndex {
	idx, err := registryIndex()
	if err != nil {
		registryErr(w, http.StatusInternalServerError, &RegistryError{Code: 50001, Message: err.Error()})
		return nil
	}
	return idx
}

// srSubjectOf returns the versions of the request's subject, or answers
// 404 with 40401: a subject of no topic, or the export subject of a client
// that has no epoch (no feed of it exists), as Confluent's registry
// answers a subject nobody registered.
func (s *Server) srSubjectOf(w http.ResponseWriter, r *http.Request) []*schemas.Schema {
	idx := srIndex(w)
	if idx == nil {
		return nil
	}
	vs, ok := idx.subject(r.PathValue("subject"))
	if client, export := exportClient(r.PathValue("subject")); export && !slices.Contains(s.clients(), client) {
		ok = false
	}
	if !ok {
		registryErr(w, http.StatusNotFound, &RegistryError{Code: codeSubjectNotFound,
			Message: fmt.Sprintf("Subject '%s' not found.", r.PathValue("subject"))})
		return nil
	}
	return vs
}

func (s *Server) srSubjects(w http.ResponseWriter, _ *http.Request) {
	idx := srIndex(w)
	if idx == nil {
		return
	}
	out := make([]string, 0, len(idx.subjects))
	for name := range idx.subjects {
		out = append(out, name)
	}
	// every client's export subjects, as they are served by name
	for _, c := range s.clients() {
		out = append(out, topics.SaasTopic(c)+"-value", topics.YtTopic(c)+"-value")
	}
	slices.Sort(out)
	writeRegistry(w, http.StatusOK, out)
}

// clients returns the clients that have an epoch: those whose export
// topics, and so subjects, exist.
func (s *Server) clients() []string {
	if s.cfg.Epochs == nil {
		return nil
	}
	return s.cfg.Epochs.Clients()
}

// exportClient returns the client of an export subject (saas.CLIENT-value,
// yt.CLIENT-value).
func exportClient(subject string) (string, bool) {
	topic, ok := strings.CutSuffix(subject, "-value")
	if !ok {
		return "", false
	}
	for _, prefix := range []string{topics.SaasPrefix, topics.YtPrefix} {
		if c, ok := strings.CutPrefix(topic, prefix); ok {
			return c, true
		}
	}
	return "", false
}

func (s *Server) srVersions(w http.ResponseWriter, r *http.Request) {
	vs := s.srSubjectOf(w, r)
	if vs == nil {
		return
	}
	out := make([]int, len(vs))
	for i := range vs {
		out[i] = i + 1
	}
	writeRegistry(w, http.StatusOK, out)
}

// srVersionOf returns the requested version, or answers the error.
func (s *Server) srVersionOf(w http.ResponseWriter, r *http.Request) (*schemas.Schema, int) {
	vs := s.srSubjectOf(w, r)
	if vs == nil {
		return nil, 0
	}
	v, rerr := version(vs, r.PathValue("version"))
	if rerr != nil {
		status := http.StatusNotFound
		if rerr.Code == codeInvalidVersion {
			status = http.StatusUnprocessableEntity
		}
		registryErr(w, status, rerr)
		return nil, 0
	}
	return vs[v-1], v
}

func (s *Server) srVersion(w http.ResponseWriter, r *http.Request) {
	if rs, v := s.srVersionOf(w, r); rs != nil {
		writeRegistry(w, http.StatusOK, SubjectVersion{Subject: r.PathValue("subject"), Version: v, ID: rs.ID, Schema: rs.Text})
	}
}

func (s *Server) srVersionSchema(w http.ResponseWriter, r *http.Request) {
	if rs, _ := s.srVersionOf(w, r); rs != nil {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_, _ = w.Write([]byte(rs.Text))
	}
}

// srByID returns the schema of the request's id, or answers 404 with 40403.
func srByID(w http.ResponseWriter, r *http.Request) *schemas.Schema {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	var rs *schemas.Schema
	if err == nil {
		rs, err = schemas.ByID(int32(id))
	}
	if err != nil {
		registryErr(w, http.StatusNotFound, &RegistryError{Code: codeSchemaNotFound, Message: fmt.Sprintf("Schema %s not found", r.PathValue("id"))})
		return nil
	}
	return rs
}

func (s *Server) srSchemaByID(w http.ResponseWriter, r *http.Request) {
	rs := srByID(w, r)
	if rs == nil {
		return
	}
	if strings.HasSuffix(r.URL.Path, "/schema") {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_, _ = w.Write([]byte(rs.Text))
		return
	}
	writeRegistry(w, http.StatusOK, map[string]string{"schema": rs.Text})
}

func (s *Server) srSchemaVersions(w http.ResponseWriter, r *http.Request) {
	rs := srByID(w, r)
	if rs == nil {
		return
	}
	idx, _ := registryIndex()
	type subjectVersion struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	out := []subjectVersion{}
	for name := range idx.subjects {
		vs, _ := idx.subject(name)
		for i, v := range vs {
			if v.ID == rs.ID {
				out = append(out, subjectVersion{Subject: name, Version: i + 1})
			}
		}
	}
	slices.SortFunc(out, func(a, b subjectVersion) int { return strings.Compare(a.Subject, b.Subject) })
	writeRegistry(w, http.StatusOK, out)
}

func (s *Server) srConfig(w http.ResponseWriter, r *http.Request) {
	if s.srSubjectOf(w, r) != nil {
		writeRegistry(w, http.StatusOK, map[string]string{"compatibilityLevel": s.compat.Of(r.PathValue("subject"))})
	}
}

// srSetConfig sets the compatibility level of a subject (PUT
// /config/{subject}) or of every subject without one (PUT /config): a
// record on schemas.registered, whence every process learns it.
func (s *Server) srSetConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if subject != "" && s.srSubjectOf(w, r) == nil {
		return
	}
	var body struct {
		Compatibility string `json:"compatibility"`
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		registryErr(w, http.StatusBadRequest, &RegistryError{Code: 400, Message: `malformed JSON: want {"compatibility": LEVEL}`})
		return
	}
	level := strings.ToUpper(body.Compatibility)
	if !slices.Contains(schemas.CompatibilityLevels, level) {
		registryErr(w, http.StatusUnprocessableEntity, &RegistryError{Code: codeInvalidCompatibility,
			Message: fmt.Sprintf("Invalid compatibility level %q: one of %s", body.Compatibility, strings.Join(schemas.CompatibilityLevels, ", "))})
		return
	}
	value, err := schemas.RegisteredSchemas.Encode(&schemas.RegisteredSchema{Subject: subject, Compatibility: level})
	if err == nil {
		rec := &kgo.Record{Topic: topics.SchemasRegistered, Key: []byte("config/" + subject), Value: value}
		err = s.cfg.Producer.ProduceSync(r.Context(), rec).FirstErr()
	}
	if err == nil {
		err = s.compat.Set(subject, level)
	}
	if err != nil {
		registryErr(w, http.StatusInternalServerError, &RegistryError{Code: 50001, Message: "Error in the backend data store: " + err.Error()})
		return
	}
	writeRegistry(w, http.StatusOK, map[string]string{"compatibility": level})
}

// registryRequest is the body of a lookup or a registration.
type registryRequest struct {
	Schema     string `json:"schema"`
	SchemaType string `json:"schemaType,omitempty"`
	References []any  `json:"references,omitempty"`
}

// srSubmitted decodes and parses the submitted schema, or answers the error.
func srSubmitted(w http.ResponseWriter, r *http.Request) avro.Schema {
	var body registryRequest
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			registryErr(w, http.StatusRequestEntityTooLarge, &RegistryError{Code: 41301, Message: "schema larger than 1 MiB"})
			return nil
		}
		registryErr(w, http.StatusBadRequest, &RegistryError{Code: 400, Message: jsonError(err).Error()})
		return nil
	}
	if body.SchemaType != "" && body.SchemaType != "AVRO" {
		registryErr(w, http.StatusUnprocessableEntity, &RegistryError{Code: codeInvalidSchema,
			Message: fmt.Sprintf("Invalid schema type %s: offerlog's topics carry Avro", body.SchemaType)})
		return nil
	}
	sch, rerr := parseSubmitted(body.Schema)
	if rerr != nil {
		registryErr(w, http.StatusUnprocessableEntity, rerr)
		return nil
	}
	return sch
}

func (s *Server) srLookup(w http.ResponseWriter, r *http.Request) {
	vs := s.srSubjectOf(w, r)
	if vs == nil {
		return
	}
	sch := srSubmitted(w, r)
	if sch == nil {
		return
	}
	v := lookup(vs, sch)
	if v == 0 {
		registryErr(w, http.StatusNotFound, &RegistryError{Code: codeSchemaNotFound, Message: "Schema not found"})
		return
	}
	rs := vs[v-1]
	writeRegistry(w, http.StatusOK, SubjectVersion{Subject: r.PathValue("subject"), Version: v, ID: rs.ID, Schema: rs.Text})
}

func (s *Server) srRegister(w http.ResponseWriter, r *http.Request) {
	vs := s.srSubjectOf(w, r)
	if vs == nil {
		return
	}
	sch := srSubmitted(w, r)
	if sch == nil {
		return
	}
	v, rerr := registerable(vs, sch, s.compat.Of(r.PathValue("subject")))
	switch {
	case rerr != nil:
		registryErr(w, http.StatusConflict, rerr)
	case v > 0:
		writeRegistry(w, http.StatusOK, map[string]int32{"id": vs[v-1].ID})
	default:
		id, err := s.register(r.Context(), r.PathValue("subject"), sch)
		if err != nil {
			registryErr(w, http.StatusInternalServerError, &RegistryError{Code: 50001, Message: "Error in the backend data store: " + err.Error()})
			return
		}
		writeRegistry(w, http.StatusOK, map[string]int32{"id": id})
	}
}

// register writes a new schema of subject on schemas.registered, whence
// every process learns it, and makes it known here at once.
func (s *Server) register(ctx context.Context, subject string, sch avro.Schema) (int32, error) {
	text, err := json.Marshal(sch)
	if err != nil {
		return 0, err
	}
	id := schemas.RegistryID(string(text))
	value, err := schemas.RegisteredSchemas.Encode(&schemas.RegisteredSchema{Subject: subject, Schema: string(text)})
	if err != nil {
		return 0, err
	}
	rec := &kgo.Record{Topic: topics.SchemasRegistered, Key: []byte(strconv.Itoa(int(id))), Value: value}
	if err := s.cfg.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, fmt.Errorf("write %s: %w", topics.SchemasRegistered, err)
	}
	registered, err := schemas.Register(string(text))
	if err != nil {
		return 0, err
	}
	return registered.ID, nil
}

// FingerprintSchema is the answer of GET /v1/schemas/{fingerprint}.
type FingerprintSchema struct {
	Name        string          `json:"name"`
	Release     string          `json:"release,omitempty"`
	Fingerprint string          `json:"fingerprint"`
	ID          int32           `json:"id"`
	Canonical   string          `json:"canonical_form"`
	Schema      json.RawMessage `json:"schema"`
}

// schemaByFingerprint answers the schema a single-object header names: the
// fingerprint as 16 hex digits (the 8 header bytes read little-endian,
// printed big-endian) or as Java's signed decimal.
func (s *Server) schemaByFingerprint(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("fingerprint")
	var fp uint64
	var err error
	if len(raw) == 16 {
		fp, err = strconv.ParseUint(raw, 16, 64)
	} else {
		var signed int64
		signed, err = strconv.ParseInt(raw, 10, 64)
		fp = uint64(signed)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fieldErr("fingerprint", "want 16 hex digits or a signed decimal, got %q", raw))
		return
	}
	sch, err := schemas.ByFingerprint(fp)
	if err != nil {
		writeError(w, http.StatusNotFound, fieldErr("fingerprint", "no schema has fingerprint %016x", fp))
		return
	}
	writeJSON(w, http.StatusOK, FingerprintSchema{Name: sch.Name, Release: sch.Release, Fingerprint: fmt.Sprintf("%016x", sch.Fingerprint),
		ID: sch.ID, Canonical: schemas.CanonicalForm(sch.Avro), Schema: json.RawMessage(sch.Text)})
}
