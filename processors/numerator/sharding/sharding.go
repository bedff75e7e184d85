// Package sharding is the library of the index's sharding schemes: given a
// scheme and an offer's key, it answers the offer's shard. The numerator
// uses it to place offers, and any other code can ask it the same question
// and get the same answer.
//
// Schemes never change once published: a new placement is a new scheme
// (the S of the state version T.S.V.G).
package sharding

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
)

// Key identifies an offer: <business_id, offer_id, shop_id, warehouse_id>.
type Key struct {
	BusinessID  uint64
	OfferID     string
	ShopID      uint64
	WarehouseID uint64
}

// String returns "business/offer/shop/warehouse", the offer's message key.
func (k Key) String() string {
	return strconv.FormatUint(k.BusinessID, 10) + "/" + k.OfferID + "/" +
		strconv.FormatUint(k.ShopID, 10) + "/" + strconv.FormatUint(k.WarehouseID, 10)
}

// Validate reports a key with a missing part: zero ids or an empty offer id.
func (k Key) Validate() error {
	var errs []error
	if k.BusinessID == 0 {
		errs = append(errs, errors.New("business_id is missing"))
	}
	if k.OfferID == "" {
		errs = append(errs, errors.New("offer_id is missing"))
	}
	if k.ShopID == 0 {
		errs = append(errs, errors.New("shop_id is missing"))
	}
	if k.WarehouseID == 0 {
		errs = append(errs, errors.New("warehouse_id is missing"))
	}
	return errors.Join(errs...)
}

// Scheme is one way of placing offers into shards.
type Scheme struct {
	ID     int64
	Shards int
	Doc    string
	place  func(Key) uint64
}

// Shard returns the offer's shard, in [0, Shards).
func (s Scheme) Shard(k Key) int { return int(s.place(k) % uint64(s.Shards)) }

// ErrUnknownScheme is returned for a scheme id that is not in the library.
var ErrUnknownScheme = errors.New("sharding: unknown scheme")

// byOffer keeps every warehouse of a business's offer in one shard.
func byOffer(k Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(k.BusinessID, 10)))
	h.Write([]byte{0})
	h.Write([]byte(k.OfferID))
	return h.Sum64()
}

// byBusiness keeps every offer of a business in one shard.
func byBusiness(k Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(k.BusinessID, 10)))
	return h.Sum64()
}

var schemes = map[int64]Scheme{
	0: {ID: 0, Shards: 16, Doc: "16 shards by business and offer id", place: byOffer},
	1: {ID: 1, Shards: 32, Doc: "32 shards by business and offer id", place: byOffer},
	2: {ID: 2, Shards: 16, Doc: "16 shards by business id", place: byBusiness},
}

// Get returns scheme id, or ErrUnknownScheme.
func Get(id int64) (Scheme, error) {
	s, ok := schemes[id]
	if !ok {
		return Scheme{}, fmt.Errorf("%w %d", ErrUnknownScheme, id)
	}
	return s, nil
}

// Shard returns the offer's shard under scheme id.
func Shard(id int64, k Key) (int, error) {
	s, err := Get(id)
	if err != nil {
		return 0, err
	}
	return s.Shard(k), nil
}

// All returns every scheme, by id.
func All() []Scheme {
	out := make([]Scheme, 0, len(schemes))
	for _, s := range schemes {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ParseKey parses "business/offer/shop/warehouse" (String's form; the offer
// id may hold '/'). It returns an error naming the part at fault.
func ParseKey(s string) (Key, error) {
	// The offer id is everything between the first slash and the last
	// two (it may hold slashes). Cut by index, without allocating: the
	// sealer parses every key of the table.
	first, last := strings.IndexByte(s, '/'), strings.LastIndexByte(s, '/')
	mid := -1
	if last > first {
		mid = strings.LastIndexByte(s[:last], '/')
	}
	if first < 0 || mid <= first {
		return Key{}, fmt.Errorf("key %q: want business_id/offer_id/shop_id/warehouse_id", s)
	}
	var k Key
	var err error
	if k.BusinessID, err = strconv.ParseUint(s[:first], 10, 64); err != nil {
		return Key{}, fmt.Errorf("key %q: business_id: %w", s, err)
	}
	if k.ShopID, err = strconv.ParseUint(s[mid+1:last], 10, 64); err != nil {
		return Key{}, fmt.Errorf("key %q: shop_id: %w", s, err)
	}
	if k.WarehouseID, err = strconv.ParseUint(s[last+1:], 10, 64); err != nil {
		return Key{}, fmt.Errorf("key %q: warehouse_id: %w", s, err)
	}
	k.OfferID = s[first+1 : mid]
	return k, nil
}

// Placement is where a key goes under a scheme: what `offerlog numerator
// shard` and GET /v1/numerator/shard answer.
type Placement struct {
	Key    string `json:"key"`
	Scheme int64  `json:"scheme"`
	Shard  int    `json:"shard"`
	Shards int    `json:"shards"`
}

// Place returns where key (business/offer/shop/warehouse) goes under
// scheme id: an error names the key's part at fault or the scheme unknown.
func Place(id int64, key string) (Placement, error) {
	s, err := Get(id)
	if err != nil {
		return Placement{}, err
	}
	k, err := ParseKey(key)
	if err == nil {
		err = k.Validate()
	}
	if err != nil {
		return Placement{}, fmt.Errorf("key %q: %w", key, err)
	}
	return Placement{Key: key, Scheme: id, Shard: s.Shard(k), Shards: s.Shards}, nil
}
