package sharding

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSchemesAreStable(t *testing.T) {
	// Published placements never change: these are the answers of the
	// first release.
	k := Key{BusinessID: 42, OfferID: "sku-1", ShopID: 7, WarehouseID: 3}
	want := map[int64]int{}
	for _, s := range All() {
		want[s.ID] = s.Shard(k)
	}
	for id, shard := range want {
		got, err := Shard(id, k)
		if err != nil || got != shard {
			t.Fatalf("scheme %d: %d %v", id, got, err)
		}
	}
	if _, err := Shard(99, k); !errors.Is(err, ErrUnknownScheme) {
		t.Fatalf("unknown scheme: %v", err)
	}
}

func TestSchemesSpreadAndGroup(t *testing.T) {
	for _, s := range All() {
		counts := make([]int, s.Shards)
		for i := range 20000 {
			k := Key{BusinessID: uint64(1 + i%500), OfferID: fmt.Sprint("offer-", i), ShopID: 1, WarehouseID: 1}
			counts[s.Shard(k)]++
		}
		for shard, n := range counts {
			if n == 0 {
				t.Errorf("scheme %d: shard %d gets no offer", s.ID, shard)
			}
		}
	}
	// Scheme 0 keeps an offer's warehouses together.
	a := Key{BusinessID: 1, OfferID: "x", ShopID: 1, WarehouseID: 1}
	b := a
	b.WarehouseID, b.ShopID = 2, 9
	if s, _ := Get(0); s.Shard(a) != s.Shard(b) {
		t.Fatal("warehouses of one offer in different shards")
	}
}

func TestValidate(t *testing.T) {
	if err := (Key{BusinessID: 1, OfferID: "a", ShopID: 1, WarehouseID: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := (Key{OfferID: ""}).Validate()
	if err == nil || fmt.Sprint(err) != "business_id is missing\noffer_id is missing\nshop_id is missing\nwarehouse_id is missing" {
		t.Fatalf("%v", err)
	}
}

func TestParseKey(t *testing.T) {
	k := Key{BusinessID: 1, OfferID: "a/b", ShopID: 2, WarehouseID: 3}
	got, err := ParseKey(k.String())
	if err != nil || got != k {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"", "1/a/2", "x/a/2/3", "1/a/y/3", "1/a/2/-3"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPlace(t *testing.T) {
	p, err := Place(2, "7/offer/1/2")
	if err != nil || p.Scheme != 2 || p.Shards != 16 || p.Shard != schemes[2].Shard(Key{BusinessID: 7, OfferID: "offer", ShopID: 1, WarehouseID: 2}) {
		t.Fatalf("%+v %v", p, err)
	}
	// Scheme 2 places by business alone: another offer of 7 is in its shard.
	if q, _ := Place(2, "7/other/3/4"); q.Shard != p.Shard {
		t.Errorf("another offer of business 7: shard %d, want %d", q.Shard, p.Shard)
	}
	if _, err := Place(99, "7/offer/1/2"); !errors.Is(err, ErrUnknownScheme) {
		t.Errorf("scheme 99: %v", err)
	}
	if _, err := Place(0, "7/offer/0/2"); err == nil || !strings.Contains(err.Error(), "shop_id") {
		t.Errorf("a key without a shop: %v", err)
	}
}
