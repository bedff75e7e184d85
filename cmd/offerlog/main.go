// Command offerlog is the one binary of the offerlog platform: the embedded
// development platform, each component for production, and the tools to
// manage topics and to produce, consume and replay events.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"dev", "[--data DIR] [--kafka-addr HOST:PORT] [--http HOST:PORT] [--fsync]", "run the whole platform on the embedded broker", runDev},
		{"broker", "[--data DIR] [--kafka-addr HOST:PORT] [--fsync] [--tls-cert F --tls-key F]", "run the embedded broker alone", runBroker},
		{"run", "COMPONENT --brokers B [--data DIR] [--http HOST:PORT]", "run one component (" + strings.Join(platform.AllComponents(), ", ") + ") against a cluster", runComponent},
		{"search", "CLIENT [WORDS...] [--filter F] [--knn-file F] [--sort F[:desc]] [--api URL]", "search a client's documents by words, filters and a vector, through the API", runSearch},
		{"get", "[--table T] [--zookeeper HOSTS | --hosts A,B] KEY...", "read keys from the serving cache and print them as JSON", runGet},
		{"token", "create (--admin | --reader | --client C | --seller S | --stage NAME) [--ttl D] | revoke ID | list  --brokers B", "create, revoke or list API tokens", runToken},
		{"topics", "ensure|list|wait --brokers B [--partitions N]", "create, check, or wait for the topic catalogue", runTopics},
		{"produce", "--brokers B TOPIC", "produce JSON lines {\"key\",\"value\"} from stdin as Avro events", runProduce},
		{"consume", "--brokers B TOPIC [--from-beginning] [--max N] [--timeout D]", "print a topic's events as JSON lines", runConsume},
		{"feeds", "status --brokers B [--seller S] TASK", "print the status of a feed task (loading, done, partial or failed, with its counts) as JSON", runFeeds},
		{"cabinet", "recount --brokers B [SELLER...]", "compare each seller's cabinet (counters, presets) with a count from scratch over its offers; exit 1 if any differ", runCabinet},
		{"lag", "--brokers B [GROUP]", "print the consumer lag of a group, or of every group, per topic and partition", runLag},
		{"deadletters", "list|redrive --brokers B DEADTOPIC [--offset N [--partition P] | --all]", "list a dead-letter topic, or put its records back on their topics", runDeadLetters},
		{"replay", "--brokers B GROUP [--data DIR] [--reemit] [--allow-gaps]", "rebuild a processor group's table from its inputs (--reemit: its outputs too, marked)", runReplay},
		{"archive", "arm --brokers B", "give the offers deleted, sold or expired before archiving existed their archive time (run once after an upgrade)", runArchive},
		{"repartition", "--brokers B --to N [--data DIR]", "move the platform's partitioned topics to N partitions (the platform stopped, every group caught up): copied by key, tables replayed", runRepartition},
		{"numerator", "seal G | rebuild --force | reshard --scheme N  --brokers B [--wait D] | states --brokers B | check --state V --data V | shard (--scheme N | --state V) KEY...",
			"seal a generation, rebuild or reshard the numerator's state; list its states; say whether data of one version may be used with a state; say a key's shard under a scheme", runNumerator},
		{"scheduler", "recrawl --stage S --brokers B [--stages FILE] | redrive STAGE --brokers B", "queue every offer a stage wants into its low-priority queue; queue again the offers of its dead letters", runScheduler},
		{"deploy", "init (--namespace NS | --secrets-dir DIR) --brokers B [--partitions N] [--credentials-only] [--kafka-tls=false] [--kafka-hosts H,...]",
			"make what a cluster needs before its components start: Kafka's certificate, its users and their ACLs, the topics, the first admin token (idempotent)", runDeploy},
		{"health", "[--http HOST:PORT]", "ask the process of this container (its OFFERLOG_HTTP) whether it is ready: exit 0 if so (the image's HEALTHCHECK)", runHealth},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: offerlog COMMAND [flags]   (offerlog help COMMAND, offerlog --version)")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n           %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set as OFFERLOG_<FLAG> (e.g. OFFERLOG_KAFKA_ADDR); flags win.")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stderr)
		return 2
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || (args[0] == "help" && len(args) == 1):
		usage(stdout)
		return 0
	case args[0] == "--version" || args[0] == "-version" || args[0] == "version":
		printVersion(stdout)
		return 0
	case args[0] == "help": // help CMD: the command's own help
		args = []string{args[1], "--help"}
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		cmdErr := stderr
		if slices.ContainsFunc(args[1:], isHelp) {
			// Asked for, the usage is the answer: on stdout.
			cmdErr = stdout
		}
		err := c.run(ctx, args[1:], stdin, stdout, cmdErr)
		if len(args) == 2 && isHelp(args[1]) && err != nil && !errors.Is(err, flag.ErrHelp) {
			// A command with subcommands checks them before its flags:
			// its help is its usage line.
			fmt.Fprintf(stdout, "usage: offerlog %s %s\n\n%s\n", c.name, c.args, c.summary)
			return 0
		}
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "offerlog %s: %v\nusage: offerlog %s %s\n", c.name, err, c.name, c.args)
			return 2
		default:
			fmt.Fprintf(stderr, "offerlog %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "offerlog: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

var errUsage = errors.New("bad usage")

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }
