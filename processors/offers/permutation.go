package offers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// idSpace is the number of offer id bodies: ten digits, the first not zero.
const idSpace = 9_000_000_000

// idHalf is the radix of the permutation's two halves: idHalf² ≥ idSpace.
const idHalf = 94_869

// idRounds is the Feistel network's rounds (FF1 uses 10).
const idRounds = 10

// Permutation is a keyed permutation of [0, 9·10⁹): a Feistel network on
// two halves in radix idHalf, with HMAC-SHA256 as its round function,
// walking the cycle back into the range when a value falls past it (Black
// and Rogaway's cycle walking, as format-preserving encryption does). A
// counter's images are distinct by construction and, without the key,
// tell nothing of their neighbours.
type Permutation struct{ key []byte }

// NewPermutation returns the permutation of key (16 bytes or more).
func NewPermutation(key []byte) Permutation { return Permutation{key: key} }

// Of returns the image of n (< 9·10⁹).
func (p Permutation) Of(n uint64) uint64 {
	mac := hmac.New(sha256.New, p.key)
	for {
		l, r := n/idHalf, n%idHalf
		for i := range idRounds {
			l, r = r, (l+round(mac, i, r))%idHalf
		}
		n = l*idHalf + r
		if n < idSpace {
			return n
		}
	}
}

// Inverse returns the n whose image is v (< 9·10⁹).
func (p Permutation) Inverse(v uint64) uint64 {
	mac := hmac.New(sha256.New, p.key)
	for {
		l, r := v/idHalf, v%idHalf
		for i := idRounds - 1; i >= 0; i-- {
			l, r = (r+idHalf-round(mac, i, l))%idHalf, l
		}
		v = l*idHalf + r
		if v < idSpace {
			return v
		}
	}
}

// round is the round function: the keyed hash of (round, half), mod idHalf.
func round(mac hash.Hash, i int, half uint64) uint64 {
	var in [9]byte
	in[0] = byte(i)
	binary.BigEndian.PutUint64(in[1:], half)
	mac.Reset()
	mac.Write(in[:])
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(mac.Sum(sum[:0])) % idHalf
}
