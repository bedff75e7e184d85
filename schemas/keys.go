package schemas

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxKeyBytes is the longest key part a producer or a client may give: a
// document's pk, a client, seller, offer or external id.
const MaxKeyBytes = 1024

// CheckKey returns why s cannot be a key part, or nil: it must be 1 to
// MaxKeyBytes bytes of valid UTF-8 with no control characters. U+FFFD is
// refused too: it is what a JSON or Avro decoder makes of bytes that are
// not UTF-8, so two different byte strings sent by a client could become
// one key; refusing it keeps every key the client's own bytes.
func CheckKey(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxKeyBytes:
		return fmt.Errorf("%d bytes, more than %d", len(s), MaxKeyBytes)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			return fmt.Errorf("U+FFFD at byte %d (a byte that was not UTF-8?)", i)
		case unicode.IsControl(r):
			return fmt.Errorf("control character %U at byte %d", r, i)
		}
	}
	return nil
}
