package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// tokenFlag is how a CLI command that calls offerlog's servers finds its
// token: --token, else OFFERLOG_TOKEN (the flag's environment default),
// else the admin token of the data directory (--data, ./data by default),
// which `offerlog dev` writes.
type tokenFlag struct {
	token, data *string
}

func (f *flags) token() tokenFlag {
	t := tokenFlag{token: f.String("token", "", "API token (default: OFFERLOG_TOKEN, else DATA/admin.token)")}
	if f.Lookup("data") == nil {
		t.data = f.String("data", platform.DefaultDataDir, "data directory whose admin.token is used when no token is given")
	}
	return t
}

// get returns the token to send, or "" if none is known (the server may
// run with --insecure).
func (t tokenFlag) get() (string, error) {
	if *t.token != "" {
		return strings.TrimSpace(*t.token), nil
	}
	if t.data == nil {
		return "", nil
	}
	b, err := os.ReadFile(filepath.Join(*t.data, platform.AdminTokenFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// caFlag is --tls-ca, which knows whether it was given: given empty, TLS
// is off, whatever the data directory holds.
type caFlag struct {
	value string
	set   bool
}

func (c *caFlag) String() string { return c.value }

func (c *caFlag) Set(s string) error {
	c.value, c.set = s, true
	return nil
}

// tlsCA adds --tls-ca to f.
func (f *flags) tlsCA(what string) *caFlag {
	c := &caFlag{}
	f.Var(c, "tls-ca", "PEM file "+what+" is trusted by; \"\" for none (default: DATA/tls/ca.pem, which offerlog dev --tls makes, if it exists)")
	return c
}

// defaultCA returns the CA --tls-ca names, or, when it was not given, the
// one offerlog dev --tls makes in the data directory (DATA/tls/ca.pem) if
// it exists, saying so on w (a CA left there by an earlier run would turn
// TLS on without a word); else "".
func (t tokenFlag) defaultCA(ca *caFlag, w io.Writer) string {
	if ca.set || t.data == nil {
		return ca.value
	}
	if def := filepath.Join(*t.data, "tls", "ca.pem"); fileExists(def) {
		fmt.Fprintf(w, "TLS: trusting %s, which offerlog dev --tls made (--tls-ca \"\" for none)\n", def)
		return def
	}
	return ""
}

// runToken manages API tokens. They are records on auth.tokens, written
// with the broker's credentials: whoever may write that topic manages
// tokens (on the embedded broker, the holder of the data directory).
func runToken(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: create, revoke or list?", errUsage)
	}
	sub := args[0]
	f := newFlags("token "+sub, stderr).produces()
	f.brokers()
	timeout := f.Duration("timeout", 10*time.Second, "how long to wait for the broker")
	var kind auth.Kind
	var subject string
	if sub == "create" {
		f.BoolFunc("admin", "a token that may do everything", func(string) error { return setKind(&kind, &subject, auth.Admin, "") })
		f.BoolFunc("reader", "a token that may read the serving cache's tables, nothing else (--cache-token)", func(string) error {
			return setKind(&kind, &subject, auth.Reader, "")
		})
		for _, k := range []auth.Kind{auth.Client, auth.Seller, auth.Stage} {
			f.Func(string(k), fmt.Sprintf("a token of this %s only", k), func(s string) error { return setKind(&kind, &subject, k, s) })
		}
	}
	ttl := f.Duration("ttl", 0, "lifetime of the token (0: until revoked)")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch sub {
	case "create":
		if kind == "" {
			return fmt.Errorf("%w: give one of --admin, --client C, --seller S, --stage NAME", errUsage)
		}
		if f.NArg() > 0 {
			return fmt.Errorf("%w: unexpected arguments %v", errUsage, f.Args())
		}
		text, rec, err := auth.New(kind, subject, *ttl, time.Now())
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		// A cluster whose catalogue was never made still takes a token:
		// its topic is the one the token needs.
		if created, err := ensureTokenTopic(ctx, kafka); err != nil {
			return err
		} else if created {
			fmt.Fprintf(stderr, "created %s (the rest of the catalogue: offerlog topics ensure)\n", topics.AuthTokens)
		}
		if err := appendToken(ctx, kafka, rec); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "token %s created: %s %s, %s\n", rec.ID, kind, subject, expiry(rec.ExpiresAt))
		fmt.Fprintln(stdout, text)
		return nil
	case "revoke":
		if f.NArg() != 1 {
			return fmt.Errorf("%w: revoke takes one token id", errUsage)
		}
		if err := checkTopic(ctx, kafka, topics.AuthTokens, *timeout); err != nil {
			return err
		}
		store, err := auth.ReadAll(ctx, kafka)
		if err != nil {
			return err
		}
		rec, ok := store.Get(f.Arg(0))
		if !ok {
			return fmt.Errorf("no token %q", f.Arg(0))
		}
		if rec.RevokedAt != 0 {
			return fmt.Errorf("token %s was already revoked at %s", rec.ID, time.UnixMilli(rec.RevokedAt).UTC().Format(time.RFC3339))
		}
		rec.RevokedAt = time.Now().UnixMilli()
		if err := appendToken(ctx, kafka, rec); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token %s revoked\n", rec.ID)
		return nil
	case "list":
		if err := checkTopic(ctx, kafka, topics.AuthTokens, *timeout); err != nil {
			return err
		}
		store, err := auth.ReadAll(ctx, kafka)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tSUBJECT\tCREATED\tEXPIRES\tREVOKED")
		for _, t := range store.List() {
			revoked := "-"
			if t.RevokedAt != 0 {
				revoked = time.UnixMilli(t.RevokedAt).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Subject, t.CreatedAt.UTC().Format(time.RFC3339),
				expiry(t.ExpiresAt), revoked)
		}
		return tw.Flush()
	}
	return fmt.Errorf("%w: unknown subcommand %q (create, revoke or list)", errUsage, sub)
}

func setKind(kind *auth.Kind, subject *string, k auth.Kind, s string) error {
	if *kind != "" {
		return fmt.Errorf("one kind per token: --%s and --%s", *kind, k)
	}
	*kind, *subject = k, s
	return nil
}

func expiry(ms int64) string {
	if ms == 0 {
		return "never"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func appendToken(ctx context.Context, kafka *streams.Cluster, rec *schemas.Token) error {
	p, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer p.Close()
	return auth.Append(ctx, p, rec)
}

// ensureTokenTopic creates auth.tokens as the catalogue says if the
// cluster lacks it, and reports whether it did.
func ensureTokenTopic(ctx context.Context, kafka *streams.Cluster) (bool, error) {
	created, err := topics.Ensure(ctx, kafka.Admin(), -1, []topics.Topic{topics.Find(topics.AuthTokens, 1)})
	if err != nil {
		return false, fmt.Errorf("%s: %w", topics.AuthTokens, err)
	}
	return len(created) > 0, nil
}
