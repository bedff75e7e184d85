package offers

import (
	"hash/fnv"
	"strconv"
)

// IDLength is the length of an offer id: ten digits, the first not zero,
// and a Luhn check digit. Short enough to read out to support, too sparse
// to enumerate (the image of a counter under a keyed permutation of the
// 9·10⁹ bodies: no neighbour relation without the key), and a mistyped
// digit is caught by the check digit.
const IDLength = 11

// IDFrom returns the offer id whose body is 10⁹ + r mod 9·10⁹.
func IDFrom(r uint64) string {
	body := strconv.FormatUint(1_000_000_000+r%idSpace, 10)
	return body + strconv.Itoa(luhn(body))
}

// ValidID reports whether id has the shape of an offer id and its check
// digit is right.
func ValidID(id string) bool {
	if len(id) != IDLength || id[0] == '0' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return luhn(id[:IDLength-1]) == int(id[IDLength-1]-'0')
}

// luhn returns the Luhn check digit of the decimal digits s.
func luhn(s string) int {
	sum := 0
	double := true // the rightmost digit of s is doubled
	for i := len(s) - 1; i >= 0; i-- {
		d := int(s[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return (10 - sum%10) % 10
}

// MaxHops is how many ids of a published draft's chain (NextID) are tried:
// a publish whose ids are all taken is refused (COLLISION) and dead-lettered.
const MaxHops = 8

// NextID returns the id that follows id in the chain of ids of owner's
// draft draftID. A draft is published under its own id; when another offer
// holds it, under the next one of its chain, and so on. The chain is a
// function of the draft, so a repeated publish follows it to the same offer
// and anyone can find the offer of a draft (the API follows it in the view).
func NextID(owner, draftID, id string) string {
	h := fnv.New64a()
	h.Write([]byte(owner + "\x00" + draftID + "\x00" + id))
	return IDFrom(h.Sum64())
}
