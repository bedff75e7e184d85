package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/listener"
)

func runDev(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("dev", stderr).produces()
	cfg := f.platform()
	f.StringVar(&cfg.KafkaAddr, "kafka-addr", cfg.KafkaAddr, "address of the embedded Kafka-protocol broker")
	f.BoolVar(&cfg.Fsync, "fsync", false, fsyncUsage)
	genTLS := f.Bool("tls", false, "serve HTTP, gRPC and Kafka over TLS with a CA and certificate made under DATA/tls (once)")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", errUsage, f.Args())
	}
	if *genTLS {
		if cfg.TLSCert != "" {
			return fmt.Errorf("%w: --tls makes its own certificate; --tls-cert brings one: give one of them", errUsage)
		}
		files, err := listener.GenerateTLS(filepath.Join(cfg.DataDir, "tls"))
		if err != nil {
			return err
		}
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = files.Cert, files.Key, files.CA
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", errUsage)
	}
	cfg.Logger = f.logger(stderr)
	cfg.Started = func(info platform.Info) { printInfo(stdout, info) }
	setMemoryLimit(platform.GoMemory(*cfg))
	return platform.Run(ctx, *cfg)
}

func printInfo(w io.Writer, info platform.Info) {
	fmt.Fprintf(w, "offerlog is running (%s)\n", strings.Join(info.Components, ", "))
	fmt.Fprintf(w, "  kafka    %s", strings.Join(info.Brokers, ","))
	if info.Embedded {
		fmt.Fprintf(w, "  (embedded broker, data in %s)", info.DataDir)
	}
	if info.KafkaConfig != "" {
		how := "SASL/SCRAM-SHA-512"
		if info.TLS {
			how += " over TLS"
		}
		fmt.Fprintf(w, "\n           %s; credentials in %s (kcat -F %s -L)", how, info.KafkaConfig, info.KafkaConfig)
	}
	fmt.Fprintln(w)
	if info.HTTPAddr != "" {
		scheme := "http"
		if info.TLS {
			scheme = "https"
		}
		fmt.Fprintf(w, "  api      %s://%s/v1/clients/{client}/...  %s://%s/v1/offers/...\n", scheme, info.HTTPAddr, scheme, info.HTTPAddr)
		fmt.Fprintf(w, "  metrics  %s://%s/metrics\n", scheme, info.HTTPAddr)
	}
	if info.GRPCAddr != "" {
		fmt.Fprintf(w, "  grpc     %s (offerlog.offer.v1.OfferService)\n", info.GRPCAddr)
	}
	switch {
	case info.Insecure:
		fmt.Fprintln(w, "  auth     OFF (--insecure): anyone who reaches a port may do everything")
	case info.AdminToken != "":
		fmt.Fprintf(w, "  auth     on; admin token in %s (export OFFERLOG_TOKEN=$(cat %s))\n", info.AdminToken, info.AdminToken)
	default:
		fmt.Fprintln(w, "  auth     on (offerlog token create makes tokens)")
	}
	if info.CacheAddr != "" {
		fmt.Fprintf(w, "  cache    %s (offerlog.serving.v1.Cache; offerlog get --hosts %s KEY)\n", info.CacheAddr, info.CacheAddr)
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}

const fsyncUsage = "fsync every batch before acknowledging it (survives a power loss; without it an acknowledged batch is in its file, which survives kill -9)"

func runBroker(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("broker", stderr).recordLimit()
	data := f.String("data", platform.DefaultDataDir, "data directory")
	addr := f.String("kafka-addr", "127.0.0.1:9092", "address to listen on")
	fsync := f.Bool("fsync", false, fsyncUsage)
	insecure := f.Bool("insecure", false, "take any client (no SASL, no ACLs)")
	cert := f.String("tls-cert", "", "PEM certificate: the listener speaks TLS only (offerlog deploy init's Secret offerlog-kafka-tls holds one)")
	key := f.String("tls-key", "", "PEM key of --tls-cert")
	ca := f.String("tls-ca", "", "PEM file clients trust --tls-cert by, named in DATA/kafka.properties (default: --tls-cert itself)")
	if err := f.parse(args); err != nil {
		return err
	}
	log := f.logger(stderr)
	cfg := broker.Config{DataDir: *data, Addr: *addr, Partitions: 8, Fsync: *fsync, SASL: !*insecure, MaxRecordBytes: f.client.MaxRecordBytes, Logger: log}
	if *cert != "" {
		var err error
		if cfg.TLS, err = listener.ServerTLS(*cert, *key); err != nil {
			return err
		}
		cfg.CAFile = cmp.Or(*ca, *cert)
	}
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "embedded broker on %s, data in %s. Press Ctrl-C to stop.\n", strings.Join(b.Addrs(), ","), *data)
	if _, ok := b.Credentials(); ok {
		fmt.Fprintf(stdout, "SASL/SCRAM-SHA-512: credentials in %s\n", filepath.Join(*data, broker.PropertiesFile))
	}
	<-ctx.Done()
	b.Close()
	log.Info("broker stopped, data flushed")
	return nil
}

func runComponent(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: which component? one of %v", errUsage, platform.AllComponents())
	}
	component := args[0]
	if !slices.Contains(platform.AllComponents(), component) && !isHelp(component) {
		return fmt.Errorf("%w: unknown component %q: one of %v", errUsage, component, platform.AllComponents())
	}
	f := newFlags("run "+component, stderr).produces()
	f.component = component
	cfg := f.platform()
	brokers := f.brokers()
	f.Func("replication", "replication factor of the topics created (default: the broker's)", func(s string) error {
		var n int16
		_, err := fmt.Sscan(s, &n)
		cfg.Replication = n
		return err
	})
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	cfg.Brokers = *brokers
	cfg.Components = []string{component}
	if component == platform.ComponentCache {
		if f.isSet("grpc") {
			cfg.Cache.Addr = cfg.GRPCAddr
		}
		cfg.GRPCAddr = ""
	}
	if component != platform.ComponentAPI && !f.httpSet() {
		// Processors still serve /metrics; default to a port of their own.
		cfg.HTTPAddr = platform.MetricsAddr(component)
	}
	cfg.Logger = f.logger(stderr)
	cfg.Started = func(info platform.Info) { printInfo(stdout, info) }
	setMemoryLimit(platform.GoMemory(*cfg))
	return platform.Run(ctx, *cfg)
}

// httpSet reports whether --http was given on the command line or in the
// environment.
func (f *flags) httpSet() bool { return f.isSet("http") }

// isSet reports whether flag name was given on the command line or in the
// environment.
func (f *flags) isSet(name string) bool {
	_, set := os.LookupEnv("OFFERLOG_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// setMemoryLimit makes the Go runtime's part of the budget
// (platform.GoMemory) its soft limit, unless GOMEMLIMIT says otherwise.
func setMemoryLimit(budget int64) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && budget > 0 {
		debug.SetMemoryLimit(budget)
	}
}
