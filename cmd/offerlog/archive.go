package main

import (
	"context"
	"fmt"
	"io"

	"github.com/offerlog/offerlog/processors/offers"
)

func runArchive(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "arm" {
		return fmt.Errorf("%w: want arm", errUsage)
	}
	f := newFlags("archive arm", stderr).produces()
	f.brokers()
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	n, err := offers.ArmArchives(ctx, kafka)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "asked the aggregate to arm the archive of %d offers done with before archiving existed\n", n)
	return nil
}
