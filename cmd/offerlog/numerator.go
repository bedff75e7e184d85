package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// runNumerator sends a command to the numerator's sealer, lists its
// states, or answers the compatibility rule.
func runNumerator(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want seal, rebuild, reshard, states, check, shard, lookup, invalidate or reset", errUsage)
	}
	verb := args[0]
	switch verb {
	case "invalidate", "reset":
		return numeratorMove(ctx, verb, args[1:], stdout, stderr)
	case "lookup":
		return numeratorLookup(ctx, args[1:], stdout, stderr)
	case "check":
		return numeratorCheck(ctx, args[1:], stdout, stderr)
	case "shard":
		return numeratorShard(args[1:], stdout, stderr)
	case "states":
		return numeratorStates(ctx, args[1:], stdout, stderr)
	}
	f := newFlags("numerator "+verb, stderr).produces()
	f.brokers()
	force := f.Bool("force", false, "rebuild: rebuild now (rebuilds also happen by themselves when holes exceed the share)")
	scheme := f.Int64("scheme", -1, "reshard: the sharding scheme to move to")
	wait := f.Duration("wait", 0, "wait this long for the state the command makes: exit 0 with it, 1 if the build was refused (its lock timed out) or none came")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	m := schemas.GenerationMarker{Scheme: -1}
	switch verb {
	case "seal":
		if f.NArg() != 1 {
			return fmt.Errorf("%w: want the GENERATION to seal", errUsage)
		}
		g, err := strconv.ParseInt(f.Arg(0), 10, 64)
		if err != nil || g < 1 {
			return fmt.Errorf("%w: generation %q is not a positive integer", errUsage, f.Arg(0))
		}
		m.Action, m.Generation = schemas.MarkerSeal, g
	case "rebuild":
		if !*force {
			return fmt.Errorf("%w: a rebuild renumbers every doc_id; say --force", errUsage)
		}
		m.Action = schemas.MarkerRebuild
	case "reshard":
		if _, err := sharding.Get(*scheme); err != nil {
			return fmt.Errorf("%w: --scheme: %v", errUsage, err)
		}
		m.Action, m.Scheme = schemas.MarkerReshard, *scheme
	default:
		return fmt.Errorf("%w: unknown verb %q (want seal, rebuild, reshard, states, check, shard, lookup, invalidate or reset)", errUsage, verb)
	}
	if m.Action == schemas.MarkerSeal {
		if st, ok, err := sealedState(ctx, kafka, m.Generation); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("generation %d is sealed already (state %s)", m.Generation, st.Version)
		}
	}
	data, err := schemas.GenerationMarkers.Encode(&m)
	if err != nil {
		return err
	}
	cl, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: data}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s sent (offset %d); the result appears on %s\n", m.Action, rec.Offset, topics.NumeratorStates)
	if *wait <= 0 {
		return nil
	}
	st, err := awaitState(ctx, kafka, rec, *wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "state %s (generation %d, ticket %d of %s)\n", st.Version, st.Generation, st.Ticket, st.Holder)
	return nil
}

// awaitState waits up to d for the record of numerator.states that names
// the marker rec: the state it made, or an error when the build was refused.
func awaitState(ctx context.Context, kafka *streams.Cluster, rec *kgo.Record, d time.Duration) (*schemas.NumeratorState, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	adm := kafka.Admin()
	var from map[int32]int64
	for {
		var found *schemas.NumeratorState
		var next map[int32]int64
		ends, err := streams.EndOffsets(ctx, adm, topics.NumeratorStates)
		if err == nil {
			next = ends
			err = streams.ReadRange(ctx, kafka, topics.NumeratorStates, from, ends, func(r *kgo.Record) {
				var st schemas.NumeratorState
				if found == nil && schemas.NumeratorStates.Decode(r.Value, &st) == nil &&
					st.MarkerPartition == rec.Partition && st.MarkerOffset == rec.Offset {
					found = &st
				}
			})
		}
		switch {
		case found != nil && found.Invalid != "":
			return nil, fmt.Errorf("the build under ticket %d of %s was refused, and left nothing: %s (the master tries again: watch %s)",
				found.Ticket, found.Holder, found.Invalid, topics.NumeratorStates)
		case found != nil:
			return found, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("no state for the marker at offset %d within %s", rec.Offset, d)
		case err == nil:
			from = next
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sealedState returns a state on numerator.states of generation g or
// later, if one is there: g is sealed already.
func sealedState(ctx context.Context, kafka *streams.Cluster, g int64) (*schemas.NumeratorState, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	states, err := numerator.States(ctx, kafka)
	if err != nil {
		return nil, false, err
	}
	for i := len(states) - 1; i >= 0; i-- {
		if st := &states[i]; st.Invalid == "" && st.Generation >= g {
			return st, true, nil
		}
	}
	return nil, false, nil
}

// errIncompatible is check's answer "no": exit 1, said on stderr.
var errIncompatible = errors.New("not usable")

// numeratorShard answers "numerator shard (--scheme N | --state V) KEY...":
// the shard of each key under a sharding scheme (or a state's), one JSON
// line a key. It needs no cluster: a scheme is code.
func numeratorShard(args []string, stdout, stderr io.Writer) error {
	f := newFlags("numerator shard", stderr)
	scheme := f.Int64("scheme", -1, "the sharding scheme (numerator states shows each state's: S of T.S.V.G)")
	state := f.String("state", "", "the state version T.S.V.G whose scheme to use, instead of --scheme")
	if err := f.parse(args); err != nil {
		return err
	}
	switch {
	case *state != "" && *scheme >= 0:
		return fmt.Errorf("%w: --scheme or --state, not both", errUsage)
	case *state != "":
		v, err := numerator.ParseVersion(*state)
		if err != nil {
			return fmt.Errorf("%w: --state: %v", errUsage, err)
		}
		*scheme = v.S
	case *scheme < 0:
		return fmt.Errorf("%w: want --scheme N or --state V", errUsage)
	}
	if f.NArg() == 0 {
		return fmt.Errorf("%w: want one KEY (business/offer/shop/warehouse) or more", errUsage)
	}
	enc := json.NewEncoder(stdout)
	for _, key := range f.Args() {
		p, err := sharding.Place(*scheme, key)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if err := enc.Encode(p); err != nil {
			return err
		}
	}
	return nil
}

// numeratorCheck answers the seed's rule: may data built on state version
// --data be used with the state --state (numerator.Compatible)?
func numeratorCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("numerator check", stderr)
	state := f.String("state", "", "the state's version T.S.V.G (with --brokers, read from numerator.states: data older than its last reuse of a doc_id is refused too)")
	data := f.String("data", "", "the version T.S.V.G the data was built on")
	// After --data: here it names a version, not a data directory (so
	// --kafka-config, not DATA/kafka.properties, gives the credentials).
	brokers := f.brokers()
	if err := f.parse(args); err != nil {
		return err
	}
	sv, err := numerator.ParseVersion(*state)
	if err != nil {
		return fmt.Errorf("%w: --state: %v", errUsage, err)
	}
	dv, err := numerator.ParseVersion(*data)
	if err != nil {
		return fmt.Errorf("%w: --data: %v", errUsage, err)
	}
	check := numerator.Compatible(dv, sv)
	if len(*brokers) > 0 {
		kafka, err := f.cluster()
		if err != nil {
			return err
		}
		defer kafka.Close()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		states, err := numerator.States(cctx, kafka)
		if err != nil {
			return err
		}
		st, ok := numerator.StateOf(states, sv.String())
		if !ok {
			return fmt.Errorf("no state %s on %s (numerator states lists them)", sv, topics.NumeratorStates)
		}
		check = numerator.CompatibleWith(dv, st)
	}
	if err := check; err != nil {
		return fmt.Errorf("%w: %v", errIncompatible, err)
	}
	fmt.Fprintf(stdout, "usable: data %s with state %s\n", dv, sv)
	return nil
}

// numeratorStates lists the states on numerator.states, oldest first, and
// the builds refused (marked invalid).
func numeratorStates(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("numerator states", stderr)
	f.brokers()
	if err := f.parse(args); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	states, err := numerator.States(ctx, kafka)
	if err != nil {
		return err
	}
	for _, st := range states {
		line := fmt.Sprintf("%-14s generation %-6d ticket %-5d %-12s %s", st.Version, st.Generation, st.Ticket, st.Holder,
			st.SealedAt.UTC().Format(time.RFC3339))
		if st.Invalid != "" {
			line += "  INVALID: " + st.Invalid
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// numeratorMove answers "numerator invalidate" and "numerator reset": an
// operator's move of the state pointer in ZooKeeper, under the write lock,
// from the cluster --brokers names (numerator.Invalidate, numerator.Reset).
// Without --confirm it says what it would do and exits 2.
func numeratorMove(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	f := newFlags("numerator "+verb, stderr)
	f.brokers()
	zkServers := f.String("zookeeper", "", "ZooKeeper ensemble host:port,... of the numerator's coordinator (required)")
	stateType := f.Int64("state-type", 0, "T of the numerator's state version T.S.V.G")
	holder := f.String("master", "operator", "the name this command takes the write lock under")
	confirm := f.Bool("confirm", false, "do it (without it: say what it would do, and exit 2)")
	var version, why *string
	if verb == "invalidate" {
		version = f.String("version", "", "the version the pointer must name (a guard against a pointer that moved meanwhile)")
		why = f.String("why", "", "why the state is declared invalid (required: it is recorded with it)")
	} else {
		version = f.String("to", "", "the version this cluster's last valid state must be (a guard)")
	}
	if err := f.parse(args); err != nil {
		return err
	}
	switch {
	case *zkServers == "":
		return fmt.Errorf("%w: --zookeeper is required", errUsage)
	case why != nil && strings.TrimSpace(*why) == "":
		return fmt.Errorf("%w: --why is required", errUsage)
	case f.NArg() > 0:
		return fmt.Errorf("%w: no positional arguments", errUsage)
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	log := f.logger(stderr)
	zk, err := coordinator.DialZooKeeper(ctx, *zkServers, fmt.Sprintf("/offerlog/numerator/%d", *stateType), 10*time.Second, log)
	if err != nil {
		return err
	}
	defer zk.Close()
	op := numerator.Operator{Kafka: kafka, Cluster: strings.Join(kafka.Brokers(), ","), Coordinator: zk, Holder: *holder,
		Type: *stateType, Logger: log}
	var move numerator.Move
	if verb == "invalidate" {
		move, err = numerator.Invalidate(ctx, op, *version, *why, *confirm)
	} else {
		move, err = numerator.Reset(ctx, op, *version, *confirm)
	}
	if err != nil {
		return err
	}
	named := func(p coordinator.Pointer) string {
		if p.Cluster == "" {
			return "no state"
		}
		return fmt.Sprintf("state %s of cluster %s", p.Version, p.Cluster)
	}
	what := "would move"
	if *confirm {
		what = "moved"
	}
	fmt.Fprintf(stdout, "the pointer %s from %s to %s\n", what, named(move.Now), named(move.After))
	if move.Invalid.Version != "" {
		fmt.Fprintf(stdout, "state %s of cluster %s (ticket %d of %s) declared invalid: %s\n", move.Invalid.Version, move.Invalid.Cluster,
			move.Invalid.Ticket, move.Invalid.Holder, move.Invalid.Why)
	}
	if !*confirm {
		return fmt.Errorf("%w: nothing done: say --confirm to do it", errUsage)
	}
	return nil
}

// numeratorLookup answers "numerator lookup --state V KEY...": each key's
// (shard, doc_id) under the state of version V, an older one too, one JSON
// line a key (numerator.Lookup); exit 1 if one is no longer kept.
func numeratorLookup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("numerator lookup", stderr)
	f.brokers()
	state := f.String("state", "", "the state's version T.S.V.G (numerator states lists them)")
	if err := f.parse(args); err != nil {
		return err
	}
	if _, err := numerator.ParseVersion(*state); err != nil {
		return fmt.Errorf("%w: --state: %v", errUsage, err)
	}
	if f.NArg() == 0 {
		return fmt.Errorf("%w: want one KEY (business/offer/shop/warehouse) or more", errUsage)
	}
	for _, k := range f.Args() {
		if _, err := sharding.ParseKey(k); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	looked, err := numerator.Lookup(ctx, kafka, *state, f.Args())
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	var errs []error
	for _, l := range looked {
		if l.Err != nil {
			errs = append(errs, l.Err)
			continue
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}
