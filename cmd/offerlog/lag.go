package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// runLag prints the consumer lag of a group, or of every group, per topic
// and partition.
func runLag(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("lag", stderr)
	brokers := f.brokers()
	timeout := f.Duration("timeout", defaultTimeout, "how long to wait for the brokers")
	if err := f.parse(args); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	if f.NArg() > 1 {
		return fmt.Errorf("%w: at most one GROUP", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cl, err := kafka.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups := f.Args()
	if len(groups) == 0 {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return fmt.Errorf("list groups on %v: %w", *brokers, err)
		}
		groups = listed.Groups()
	}
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return fmt.Errorf("lag on %v: %w", *brokers, err)
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG")
	for _, l := range lags.Sorted() {
		if l.Error() != nil {
			fmt.Fprintf(tw, "%s\t\t\t\t\t%v\n", l.Group, l.Error())
			continue
		}
		for _, ml := range l.Lag.Sorted() {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", l.Group, ml.Topic, ml.Partition, ml.Commit.At, ml.End.Offset, ml.Lag)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(f.Args()) == 1 {
		committed, err := adm.FetchOffsets(ctx, groups[0])
		if errors.Is(err, kerr.GroupIDNotFound) || (err == nil && len(committed) == 0) {
			return fmt.Errorf("group %q has no commits on %v", groups[0], *brokers)
		}
		if err != nil {
			return fmt.Errorf("commits of %q on %v: %w", groups[0], *brokers, err)
		}
	}
	return nil
}
