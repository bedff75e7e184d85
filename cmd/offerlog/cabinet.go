package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// recountLine is one seller's line of cabinet recount.
type recountLine struct {
	Seller  string                 `json:"seller"`
	Equal   bool                   `json:"equal"`
	Diff    string                 `json:"diff,omitempty"`
	Cabinet *schemas.SellerCabinet `json:"cabinet"`
	Recount *schemas.SellerCabinet `json:"recount"`
}

// runCabinet answers "cabinet recount [SELLER...]": the counters and
// presets of each seller's cabinet (the sum of its spread keys on
// cabinet-table) beside a count from scratch over its offers (offers-table,
// and offers.archive for the offers archived since: the cabinet keeps
// counting them), one JSON line a seller; exit 1 if any differ. The
// cabinet counts later than the offers change (RULES.md, G10): run it on
// a quiet platform, or again where a line differs.
func runCabinet(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "recount" {
		return fmt.Errorf("%w: want recount", errUsage)
	}
	f := newFlags("cabinet recount", stderr)
	brokers := f.brokers()
	timeout := f.Duration("timeout", defaultTimeout, "how long to wait for the brokers and to read the tables")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	want := map[string]bool{}
	for _, s := range f.Args() {
		want[s] = true
	}
	mine := func(seller string) bool { return len(want) == 0 || want[seller] }
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	live := map[string]*schemas.OfferRecord{}
	var bad error
	err = streams.ReadLatest(ctx, kafka, string(topics.OffersTable), func(r *kgo.Record) {
		var rec schemas.OfferRecord
		if err := schemas.OfferRecords.Decode(r.Value, &rec); err != nil {
			bad = errors.Join(bad, fmt.Errorf("%s %s: %w", topics.OffersTable, r.Key, err))
			return
		}
		if mine(rec.Offer.SellerID) {
			live[string(r.Key)] = &rec
		}
	})
	if err != nil {
		return fmt.Errorf("read %s on %v: %w", topics.OffersTable, *brokers, err)
	}
	archived := map[string]*schemas.OfferRecord{}
	err = streams.ReadToEnd(ctx, kafka, string(topics.OffersArchive), func(r *kgo.Record) {
		var rec schemas.OfferRecord
		if r.Value == nil || schemas.OfferRecords.Decode(r.Value, &rec) != nil || !mine(rec.Offer.SellerID) {
			return
		}
		archived[string(r.Key)] = &rec
	})
	if err != nil {
		return fmt.Errorf("read %s on %v: %w", topics.OffersArchive, *brokers, err)
	}
	var recs []*schemas.OfferRecord
	for _, r := range live {
		recs = append(recs, r)
	}
	for k, r := range archived {
		if live[k] == nil {
			recs = append(recs, r)
		}
	}
	parts := map[string]*schemas.SellerCabinet{}
	err = streams.ReadLatest(ctx, kafka, string(topics.CabinetTable), func(r *kgo.Record) {
		var c schemas.SellerCabinet
		if err := schemas.SellerCabinets.Decode(r.Value, &c); err != nil {
			bad = errors.Join(bad, fmt.Errorf("%s %s: %w", topics.CabinetTable, r.Key, err))
			return
		}
		if mine(c.SellerID) {
			parts[string(r.Key)] = &c
		}
	})
	if err != nil {
		return fmt.Errorf("read %s on %v: %w", topics.CabinetTable, *brokers, err)
	}
	if bad != nil {
		return fmt.Errorf("records that do not decode: %w", bad)
	}
	counted, kept := cabinet.Recount(recs), cabinet.Merge(parts)
	sellers := map[string]bool{}
	for s := range want {
		sellers[s] = true
	}
	for s := range counted {
		sellers[s] = true
	}
	for s := range kept {
		sellers[s] = true
	}
	enc := json.NewEncoder(stdout)
	var differ []string
	for _, s := range slices.Sorted(maps.Keys(sellers)) {
		line := recountLine{Seller: s, Cabinet: kept[s], Recount: counted[s]}
		if line.Cabinet == nil {
			line.Cabinet = cabinet.Empty(s)
		}
		if line.Recount == nil {
			line.Recount = cabinet.Empty(s)
		}
		line.Equal, line.Diff = cabinet.Equal(line.Cabinet, line.Recount)
		if !line.Equal {
			differ = append(differ, s)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("the cabinet of %d sellers differs from a recount of their offers: %s", len(differ), strings.Join(differ, ", "))
	}
	return nil
}
