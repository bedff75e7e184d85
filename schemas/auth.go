package schemas

import "time"

// TokenName is the schema of an API token's record.
const TokenName = "offerlog.auth.Token"

// Token is an API token as kept on auth.tokens, keyed by ID: its scope and
// the SHA-256 of its text, never the text.
type Token struct {
	ID        string    `avro:"id"`
	Hash      []byte    `avro:"hash"`
	Kind      string    `avro:"kind"`
	Subject   string    `avro:"subject"`
	CreatedAt time.Time `avro:"created_at"`
	// ExpiresAt and RevokedAt are unix milliseconds, 0 for never.
	ExpiresAt int64 `avro:"expires_at"`
	RevokedAt int64 `avro:"revoked_at"`
}

// Tokens is the codec of Token.
var Tokens = codecFor[Token](TokenName)
