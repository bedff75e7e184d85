package scheduler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/offerlog/offerlog/processors/offers"
)

// StageConfig is one stage of the configuration file.
type StageConfig struct {
	Name string `yaml:"name"`
	// Builtin names a stage of the binary ("expiry"); Address an external
	// gRPC Stage service. Exactly one is set.
	Builtin string `yaml:"builtin"`
	Address string `yaml:"address"`
	// RateLimit bounds Process calls per second (0: none); MaxParallelism
	// the calls in flight (default 4).
	RateLimit      float64 `yaml:"rate_limit"`
	MaxParallelism int     `yaml:"max_parallelism"`
	// LowShare is the share of the slots freed that go to the
	// low-priority queue (re-crawls) while fresh changes wait as well, so
	// re-crawls never starve (default 0.1); otherwise fresh changes go
	// first.
	LowShare float64 `yaml:"low_share"`
	// Fields are the offer fields the stage is interested in: a change
	// touching none of them does not ask it (empty: every change asks).
	Fields []string `yaml:"fields"`
	// MaxFailures is how many times Process may fail on one offer before
	// the item goes to scheduler.dead (default 5).
	MaxFailures int `yaml:"max_failures"`
	// PushURL, if set, is the stage's push hook: every result of the
	// stage, once saved, is POSTed there as JSON (scheduler.Push) at least
	// once, with a dedup key (also the Idempotency-Key header).
	PushURL string `yaml:"push_url"`
	// PushTopic, if set, makes the stage's push hook its own topic
	// instead (topics.PushTopic: scheduler.push.STAGE): every result, once
	// saved, is written there at least once as a StageEffect with the
	// stage's state in clear and the dedup key in the dedup_key header.
	PushTopic bool `yaml:"push_topic"`
	// RecrawlEvery re-crawls the stage this often (0: never): every offer
	// it wants goes to its low-priority queue.
	RecrawlEvery time.Duration `yaml:"recrawl_every"`
	// MaxWait is how long items wait, with backoff, for an external stage
	// that is away (its connection down) before they are dead-lettered
	// (default 10 minutes); waiting counts no failure.
	MaxWait time.Duration `yaml:"max_wait"`
	// Timeout bounds one call to the stage (default 5 s).
	Timeout time.Duration `yaml:"timeout"`
	// Days is the expiry stage's exposure (default 180).
	Days int `yaml:"days"`
	// Patches makes the stage's offer results patches of the fields it
	// changed: applied to the offer's current version unless one of those
	// fields changed since the stage read it (a whole result of an older
	// version is always discarded and the stage run again).
	Patches bool `yaml:"patches"`
	// Exclusive makes the stage one of those that never run on an offer
	// together (the seed's first version: one stage at a time on an
	// offer): while another exclusive stage holds the offer (is queued
	// for it), this one waits, and is queued once that one's result is
	// in. Stages are optimistic by default (RULES.md).
	Exclusive bool `yaml:"exclusive"`
}

// Config is the stages configuration file: which stages run.
type Config struct {
	Stages []StageConfig `yaml:"stages"`
}

// DefaultConfig runs the built-in expiry stage alone.
func DefaultConfig() Config {
	return Config{Stages: []StageConfig{{Name: "expiry", Builtin: "expiry", Days: DefaultExpiryDays, MaxParallelism: 4}}}
}

// yamlTypes is the Go type names in the YAML decoder's errors, which say
// nothing to whoever wrote the file.
var yamlTypes = regexp.MustCompile(` in type [\w.]+| into [\w.\[\]]+`)

// LoadConfig reads a YAML stages file.
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("stages: %w", err)
	}
	var c Config
	// Strict: a misspelt key (rate_limt:) is an error naming its line, not
	// a stage silently left unlimited.
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("stages %s: %s", path, yamlTypes.ReplaceAllString(err.Error(), ""))
	}
	return c, c.Validate()
}

// Validate returns every problem of c, or nil, and fills in defaults.
func (c *Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i := range c.Stages {
		s := &c.Stages[i]
		if err := offers.ValidStage(s.Name); err != nil {
			errs = append(errs, err)
		}
		if s.Name == offers.ArchiveStage {
			errs = append(errs, fmt.Errorf("stage %s: the name is the offers' archive timer's, not a stage's", s.Name))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("stage %s listed twice", s.Name))
		}
		seen[s.Name] = true
		switch {
		case (s.Builtin == "") == (s.Address == ""):
			errs = append(errs, fmt.Errorf("stage %s: give either builtin or address", s.Name))
		case s.Builtin != "" && s.Builtin != "expiry":
			errs = append(errs, fmt.Errorf("stage %s: no built-in stage %q (have expiry)", s.Name, s.Builtin))
		}
		for _, f := range s.Fields {
			if !slices.Contains(offers.Fields, f) {
				errs = append(errs, fmt.Errorf("stage %s: no field %q (have %v)", s.Name, f, offers.Fields))
			}
		}
		if s.RateLimit < 0 {
			errs = append(errs, fmt.Errorf("stage %s: negative rate limit", s.Name))
		}
		if s.MaxParallelism <= 0 {
			s.MaxParallelism = 4
		}
		switch {
		case s.LowShare < 0 || s.LowShare > 1:
			errs = append(errs, fmt.Errorf("stage %s: low_share %v not within [0, 1]", s.Name, s.LowShare))
		case s.LowShare == 0:
			s.LowShare = 0.1
		}
		if s.MaxFailures <= 0 {
			s.MaxFailures = 5
		}
		if s.Timeout <= 0 {
			s.Timeout = 5 * time.Second
		}
		if s.PushURL != "" {
			if u, err := url.Parse(s.PushURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("stage %s: push_url %q is not an http(s) URL", s.Name, s.PushURL))
			}
		}
		if s.PushURL != "" && s.PushTopic {
			errs = append(errs, fmt.Errorf("stage %s: give push_url or push_topic, not both", s.Name))
		}
		if s.RecrawlEvery < 0 {
			errs = append(errs, fmt.Errorf("stage %s: negative recrawl_every", s.Name))
		}
		if s.MaxWait <= 0 {
			s.MaxWait = 10 * time.Minute
		}
	}
	return errors.Join(errs...)
}

// PushTopics returns the names of the stages whose push hook is a topic.
func (c Config) PushTopics() []string {
	var out []string
	for _, s := range c.Stages {
		if s.PushTopic {
			out = append(out, s.Name)
		}
	}
	return out
}

// Names returns the stages' names.
func (c Config) Names() []string {
	out := make([]string, len(c.Stages))
	for i, s := range c.Stages {
		out[i] = s.Name
	}
	return out
}

// Exclusive returns the names of the exclusive stages, in order.
func (c Config) Exclusive() []string {
	var out []string
	for _, s := range c.Stages {
		if s.Exclusive {
			out = append(out, s.Name)
		}
	}
	return out
}

// Open returns the stage of s.
func (s StageConfig) Open() (Stage, func(), error) {
	if s.Builtin == "expiry" {
		return Expiry{Days: s.Days}, func() {}, nil
	}
	r, err := DialRemote(s.Name, s.Address)
	if err != nil {
		return nil, nil, err
	}
	return r, func() { _ = r.Close() }, nil
}

// Interested reports whether a change of fields concerns the stage.
func (s StageConfig) Interested(changed []string) bool {
	if len(s.Fields) == 0 {
		return true
	}
	for _, f := range changed {
		if slices.Contains(s.Fields, f) {
			return true
		}
	}
	return false
}
