// Package auth is who may call offerlog: API tokens, their scopes, and
// the checks the HTTP and gRPC servers make with them.
//
// A token is "olt_<id>_<secret>". Its record on the compacted topic
// auth.tokens, keyed by id, holds its scope and the SHA-256 of its text,
// never the text; every process follows the topic (Store.Follow), so a
// token created or revoked anywhere is known everywhere within seconds.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

// Kind is what a token may act as.
type Kind string

// Kinds of tokens.
const (
	// Admin may do everything: bans, moderation, the numerator, tokens.
	Admin Kind = "admin"
	// Client may write and read its own epochs and documents.
	Client Kind = "client"
	// Seller may act on its own offers, drafts, cabinet, counters and feeds.
	Seller Kind = "seller"
	// Stage may read and update its own stage's private state.
	Stage Kind = "stage"
	// Reader may read the serving cache's tables and nothing else: the
	// token the API's reads send to the cache (an admin token there would
	// let whoever holds an API pod do everything).
	Reader Kind = "reader"
)

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Admin, Client, Seller, Stage, Reader:
		return k, nil
	}
	return "", fmt.Errorf("token kind %q: want admin, client, seller, stage or reader", s)
}

// Scope is what a caller may do: its kind, and the client, seller or stage
// it acts for.
type Scope struct {
	Kind    Kind
	Subject string
	// TokenID names the token (empty when auth is off).
	TokenID string
	// Insecure is set when auth is off: the caller may do everything.
	Insecure bool
}

// Allows reports whether s may act for the kind's subject: an admin for
// everything, any other token for its own subject of its own kind.
func (s Scope) Allows(k Kind, subject string) bool {
	return s.Kind == Admin || (s.Kind == k && s.Subject == subject && subject != "")
}

func (s Scope) String() string {
	if s.Subject == "" {
		return string(s.Kind)
	}
	return string(s.Kind) + " " + s.Subject
}

// ErrForbidden is returned by checks of a known token outside its scope.
var ErrForbidden = errors.New("forbidden")

// Forbidden returns an error saying that s may not act for k's subject.
func Forbidden(s Scope, k Kind, subject string) error {
	return fmt.Errorf("%w: a %s token may not act for %s %q", ErrForbidden, s, k, subject)
}

// Check returns nil if s may act for the kind's subject, else a Forbidden
// error.
func (s Scope) Check(k Kind, subject string) error {
	if s.Allows(k, subject) {
		return nil
	}
	return Forbidden(s, k, subject)
}

// CheckAdmin returns nil for an admin, else a Forbidden error.
func (s Scope) CheckAdmin(what string) error {
	if s.Kind == Admin {
		return nil
	}
	return fmt.Errorf("%w: %s needs an admin token, not a %s token", ErrForbidden, what, s)
}

// ErrUnauthenticated is returned for a missing, malformed, unknown,
// expired or revoked token.
var ErrUnauthenticated = errors.New("unauthenticated")

const prefix = "olt_"

// New returns a new token of kind for subject (none for an admin),
// expiring after ttl (0: never): its text, to give to its holder once,
// and its record, to append to auth.tokens.
func New(k Kind, subject string, ttl time.Duration, now time.Time) (string, *schemas.Token, error) {
	if _, err := ParseKind(string(k)); err != nil {
		return "", nil, err
	}
	if ttl < 0 {
		return "", nil, fmt.Errorf("ttl %v is negative", ttl)
	}
	switch {
	case (k == Admin || k == Reader) && subject != "":
		return "", nil, fmt.Errorf("%s tokens have no subject", k)
	case k != Admin && k != Reader:
		if err := schemas.CheckKey(subject); err != nil {
			return "", nil, fmt.Errorf("%s token subject: %w", k, err)
		}
	}
	var id [8]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", nil, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", nil, err
	}
	text := prefix + hex.EncodeToString(id[:]) + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	rec := &schemas.Token{ID: hex.EncodeToString(id[:]), Hash: hash(text), Kind: string(k), Subject: subject,
		CreatedAt: now.UTC().Truncate(time.Millisecond)}
	if ttl > 0 {
		rec.ExpiresAt = now.Add(ttl).UnixMilli()
	}
	return text, rec, nil
}

// Record returns the record of a token whose text was made before (by New,
// kept in a secret store) for kind and subject, never expiring: what
// offerlog deploy init appends for the tokens it keeps in Secrets.
func Record(text string, k Kind, subject string, now time.Time) (*schemas.Token, error) {
	id, ok := idOf(text)
	if !ok {
		return nil, errors.New("not an offerlog token (want olt_<16 hex digits>_<secret>)")
	}
	if _, err := ParseKind(string(k)); err != nil {
		return nil, err
	}
	return &schemas.Token{ID: id, Hash: hash(text), Kind: string(k), Subject: subject, CreatedAt: now.UTC().Truncate(time.Millisecond)}, nil
}

// ID returns the id of a token's text ("" if it is not one).
func ID(text string) string {
	id, _ := idOf(text)
	return id
}

func hash(text string) []byte {
	h := sha256.Sum256([]byte(text))
	return h[:]
}

// idOf returns the id of a token's text.
func idOf(text string) (string, bool) {
	rest, ok := strings.CutPrefix(text, prefix)
	if !ok {
		return "", false
	}
	id, secret, ok := strings.Cut(rest, "_")
	return id, ok && len(id) == 16 && secret != ""
}

// verify returns the scope of text given its record.
func verify(rec *schemas.Token, text string, now time.Time) (Scope, error) {
	switch {
	case rec == nil || subtle.ConstantTimeCompare(rec.Hash, hash(text)) != 1:
		return Scope{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	case rec.RevokedAt != 0:
		return Scope{}, fmt.Errorf("%w: token %s was revoked", ErrUnauthenticated, rec.ID)
	case rec.ExpiresAt != 0 && now.UnixMilli() >= rec.ExpiresAt:
		return Scope{}, fmt.Errorf("%w: token %s expired at %s", ErrUnauthenticated, rec.ID,
			time.UnixMilli(rec.ExpiresAt).UTC().Format(time.RFC3339))
	}
	return Scope{Kind: Kind(rec.Kind), Subject: rec.Subject, TokenID: rec.ID}, nil
}
