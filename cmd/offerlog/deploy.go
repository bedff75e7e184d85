package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// The Secrets offerlog deploy init keeps: their names are the manifests'
// contract (deploy/k8s and deploy/compose.yaml read them).
const (
	// secretKafka holds the SCRAM-SHA-512 super user of the cluster (the
	// brokers', deploy init's and the operators'): username, password,
	// ca.crt and kafka.properties (what --kafka-config takes). Each user
	// component has a user of its own, in secretKafka-COMPONENT
	// (componentSecret), allowed what its spec declares.
	secretKafka = "offerlog-kafka"
	// secretKafkaCA holds the cluster's CA (ca.crt, ca.key): only deploy
	// init reads it, to issue the brokers' certificate.
	secretKafkaCA = "offerlog-kafka-ca"
	// secretKafkaTLS holds the brokers' certificate (tls.crt, tls.key) and
	// the CA's (ca.crt): Kafka's pods mount it.
	secretKafkaTLS = "offerlog-kafka-tls"
	// secretTokens holds the first admin token (admin) and the admin token
	// the API's reads send to the cache (cache).
	secretTokens = "offerlog-tokens"
	// secretZooKeeper holds the credentials (auth, "user:password") every
	// component's ZooKeeper session authenticates with, so that offerlog's
	// znodes are its own (zkconn.AuthFileEnv names the file).
	secretZooKeeper = "offerlog-zookeeper"
	kafkaUser       = "offerlog"
)

// runDeploy is offerlog deploy init: what a cluster needs before its
// components start, made once and kept where the manifests read it, so
// that kubectl apply -k (or docker compose up) on an empty cluster needs no
// hand step. It is idempotent: what exists is kept.
//
//  1. the Kafka cluster's CA (Secret offerlog-kafka-ca) and the brokers'
//     certificate it signs (offerlog-kafka-tls), unless --kafka-tls=false;
//     the super user's credentials (offerlog-kafka): Kafka's pods wait for
//     them and create the user from them; and the ZooKeeper credentials
//     (Secret offerlog-zookeeper) every component's session authenticates
//     with;
//  2. with the cluster up (SASL with those credentials): the topic
//     catalogue, as offerlog topics ensure;
//  3. a Kafka user per component (offerlog-kafka-COMPONENT, the user
//     offerlog-COMPONENT), created on the cluster with the ACLs its spec
//     declares (component.Grants) where the cluster enforces ACLs;
//  4. the first admin token and the cache's token (Secret offerlog-tokens),
//     registered on auth.tokens unless their ids are there already (a
//     revoked one stays revoked).
func runDeploy(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "init" {
		return fmt.Errorf("%w: want init", errUsage)
	}
	f := newFlags("deploy init", stderr).produces()
	brokers := f.brokers()
	partitions := f.Int("partitions", 8, "partitions of the catalogue's partitioned topics")
	replication := f.Int("replication", -1, "replication factor of created topics (-1: the broker's default)")
	inputRetention := f.Duration("input-retention", 0, inputRetentionUsage)
	namespace := f.String("namespace", "", "keep the Secrets in this Kubernetes namespace, through the API server of the pod's service account")
	dir := f.String("secrets-dir", "", "keep the secrets as files under this directory instead (DIR/SECRET/KEY, readable by the volume's other users): for compose, or a machine without Kubernetes")
	credentialsOnly := f.Bool("credentials-only", false, "only make what Kafka needs to start: its certificate and super user (before Kafka starts)")
	kafkaTLS := f.Bool("kafka-tls", true, "Kafka speaks TLS: make its CA and the brokers' certificate, and clients' properties for SASL_SSL")
	renew := f.Bool("renew-kafka-cert", false, "issue the brokers' certificate again now (it is anyway when it expires within "+renewBefore.String()+"); restart Kafka's brokers to take it")
	kafkaHosts := f.String("kafka-hosts", "kafka,*.kafka,*.kafka.offerlog.svc,*.kafka.offerlog.svc.cluster.local,localhost,127.0.0.1",
		"comma-separated names (and IP addresses) of the brokers' certificate")
	timeout := f.Duration("timeout", 10*time.Minute, "how long to wait for the cluster to answer")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	var store secretStore
	switch {
	case *dir != "" && *namespace != "":
		return fmt.Errorf("%w: --secrets-dir or --namespace, not both", errUsage)
	case *dir != "":
		store = dirSecrets(*dir)
	case *namespace != "":
		k, err := inClusterSecrets(*namespace)
		if err != nil {
			return err
		}
		store = k
	default:
		return fmt.Errorf("%w: where do the secrets go? --namespace NS (Kubernetes) or --secrets-dir DIR", errUsage)
	}
	log := f.logger(stderr)

	var caPEM []byte
	if *kafkaTLS {
		var err error
		if caPEM, err = ensureKafkaTLS(ctx, store, strings.Split(*kafkaHosts, ","), *renew, stdout); err != nil {
			return err
		}
	}
	kafka, made, err := ensureSecret(ctx, store, secretKafka, func() (map[string][]byte, error) { return kafkaUserSecret(kafkaUser, caPEM) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "secret %s: %s\n", secretKafka, madeOrKept(made))
	_, made, err = ensureSecret(ctx, store, secretZooKeeper, func() (map[string][]byte, error) {
		pw, err := randomText(24)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"auth": []byte(kafkaUser + ":" + pw)}, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "secret %s: %s\n", secretZooKeeper, madeOrKept(made))
	if *credentialsOnly {
		return nil
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	f.creds = &streams.Credentials{Mechanism: "SCRAM-SHA-512", User: string(kafka["username"]), Password: string(kafka["password"])}
	if ca := kafka["ca.crt"]; len(ca) > 0 {
		if f.creds.TLS, err = streams.ClientTLSOf(ca); err != nil {
			return fmt.Errorf("secret %s: ca.crt: %w", secretKafka, err)
		}
	}
	cluster, err := f.cluster()
	if err != nil {
		return err
	}
	defer cluster.Close()
	adm := cluster.Admin()
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		_, err := adm.BrokerMetadata(wctx)
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			return fmt.Errorf("the cluster %s did not answer within %v: %w", strings.Join(*brokers, ","), *timeout, err)
		}
		log.Info("waiting for the cluster", "brokers", *brokers, "err", err)
		select {
		case <-wctx.Done():
		case <-time.After(streams.DefaultBackoff.Wait(attempt + 1)):
		}
	}

	catalogue, _, err := withClientTopics(ctx, adm, int32(*partitions))
	if err != nil {
		return err
	}
	if err := ensureCatalogue(ctx, adm, int16(*replication), topics.WithInputRetention(catalogue, *inputRetention), stdout); err != nil {
		return err
	}
	if err := ensureComponentUsers(ctx, store, adm, caPEM, stdout); err != nil {
		return err
	}

	tokens, made, err := ensureSecret(ctx, store, secretTokens, func() (map[string][]byte, error) {
		out := map[string][]byte{}
		for _, key := range []string{"admin", "cache"} {
			text, _, err := auth.New(auth.Admin, "", 0, time.Now())
			if err != nil {
				return nil, err
			}
			out[key] = []byte(text)
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "secret %s: %s\n", secretTokens, madeOrKept(made))
	known, err := auth.ReadAll(ctx, cluster)
	if err != nil {
		return fmt.Errorf("read auth.tokens: %w", err)
	}
	prod, err := cluster.Client(kgo.DefaultProduceTopic(topics.AuthTokens))
	if err != nil {
		return err
	}
	defer prod.Close()
	for _, key := range []string{"admin", "cache"} {
		text := strings.TrimSpace(string(tokens[key]))
		if _, ok := known.Get(auth.ID(text)); ok {
			fmt.Fprintf(stdout, "token %s (%s): registered already\n", auth.ID(text), key)
			continue
		}
		kind := auth.Admin
		if key == "cache" {
			kind = auth.Reader // reads the cache's tables, nothing else
		}
		rec, err := auth.Record(text, kind, "", time.Now())
		if err != nil {
			return fmt.Errorf("secret %s, key %s: %w", secretTokens, key, err)
		}
		if err := auth.Append(ctx, prod, rec); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token %s (%s, %s): registered\n", rec.ID, key, kind)
	}
	return nil
}

func madeOrKept(made bool) string {
	if made {
		return "created"
	}
	return "kept"
}

// kafkaProperties is the client properties of a SCRAM-SHA-512 user, as
// --kafka-config and kcat -F take them (bootstrap.servers comes from
// --brokers / OFFERLOG_BROKERS): over TLS if tls, trusting the ca.crt
// beside the file (offerlog reads a relative ssl.ca.location from the
// properties' directory; kcat from its working directory).
func kafkaProperties(user, password string, tls bool) string {
	if tls {
		return "security.protocol=SASL_SSL\nssl.ca.location=ca.crt\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=" + user + "\nsasl.password=" + password + "\n"
	}
	return "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=" + user + "\nsasl.password=" + password + "\n"
}

// kafkaUserSecret makes the Secret of a new Kafka user: username,
// password, kafka.properties and, over TLS, ca.crt.
func kafkaUserSecret(user string, caPEM []byte) (map[string][]byte, error) {
	pw, err := randomText(24)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{
		"username":         []byte(user),
		"password":         []byte(pw),
		"kafka.properties": []byte(kafkaProperties(user, pw, caPEM != nil)),
	}
	if caPEM != nil {
		data["ca.crt"] = caPEM
	}
	return data, nil
}

// componentSecret is the Secret of a component's Kafka user.
func componentSecret(name string) string { return secretKafka + "-" + name }

// renewBefore is how long before the brokers' certificate expires deploy
// init issues it again (every upgrade runs init: a certificate of two
// years is renewed by the upgrades of its last two months, or by
// --renew-kafka-cert).
const renewBefore = 60 * 24 * time.Hour

// ensureKafkaTLS makes the cluster's CA and the brokers' certificate for
// hosts, unless they exist, and returns the CA's certificate. The
// brokers' is issued for two years, again when it expires within
// renewBefore or renew says so; the CA for ten (clients trust the CA: a
// new certificate of the brokers needs nothing of them).
func ensureKafkaTLS(ctx context.Context, store secretStore, hosts []string, renew bool, stdout io.Writer) ([]byte, error) {
	caData, made, err := ensureSecret(ctx, store, secretKafkaCA, func() (map[string][]byte, error) {
		ca, err := listener.NewAuthority("offerlog Kafka CA")
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM}, nil
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "secret %s: %s\n", secretKafkaCA, madeOrKept(made))
	ca, err := listener.ParseAuthority(caData["ca.crt"], caData["ca.key"])
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", secretKafkaCA, err)
	}
	issue := func() (map[string][]byte, error) {
		cert, key, err := ca.Issue("kafka", hosts, 2*365*24*time.Hour)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": cert, "tls.key": key}, nil
	}
	data, made, err := ensureSecret(ctx, store, secretKafkaTLS, issue)
	if err != nil {
		return nil, err
	}
	expires, err := listener.NotAfter(data["tls.crt"])
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", secretKafkaTLS, err)
	}
	if !made && (renew || time.Until(expires) < renewBefore) {
		if data, err = issue(); err != nil {
			return nil, err
		}
		if err := store.replace(ctx, secretKafkaTLS, data); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "secret %s: renewed (the old one expires at %s); restart Kafka's brokers to take it\n",
			secretKafkaTLS, expires.Format(time.RFC3339))
		return ca.CertPEM, nil
	}
	fmt.Fprintf(stdout, "secret %s: %s\n", secretKafkaTLS, madeOrKept(made))
	return ca.CertPEM, nil
}

// ensureComponentUsers gives every component a Kafka user of its own:
// its Secret (made once, kept), its SCRAM-SHA-512 credentials on the
// cluster (set again on every run: a cluster formatted anew gets them
// back) and the ACLs its spec and those it needs declare, where the
// cluster enforces ACLs (one that answers SECURITY_DISABLED does not).
func ensureComponentUsers(ctx context.Context, store secretStore, adm *kadm.Client, caPEM []byte, stdout io.Writer) error {
	enforced := true
	for _, name := range platform.AllComponents() {
		user := kafkaUser + "-" + name
		data, made, err := ensureSecret(ctx, store, componentSecret(name), func() (map[string][]byte, error) {
			data, err := kafkaUserSecret(user, caPEM)
			if err != nil {
				return nil, err
			}
			// the user exists before a pod can read its Secret
			return data, upsertSCRAM(ctx, adm, user, string(data["password"]))
		})
		if err != nil {
			return err
		}
		if err := upsertSCRAM(ctx, adm, user, string(data["password"])); err != nil {
			return err
		}
		grants := component.Grants(platform.UserSpecs(name))
		pruned := 0
		if enforced {
			err := createACLs(ctx, adm, user, grants)
			if err == nil {
				pruned, err = pruneACLs(ctx, adm, user, grants)
			}
			switch {
			case errors.Is(err, kerr.SecurityDisabled):
				enforced = false
				fmt.Fprintln(stdout, "ACLs: the cluster enforces none (no authorizer); every user may do everything")
			case err != nil:
				return fmt.Errorf("ACLs of %s: %w", user, err)
			}
		}
		acls := fmt.Sprintf("%d ACLs", len(grants))
		if pruned > 0 {
			acls += fmt.Sprintf(", %d it no longer declares removed", pruned)
		}
		if !enforced {
			acls = "no ACLs"
		}
		fmt.Fprintf(stdout, "secret %s: %s; user %s, %s\n", componentSecret(name), madeOrKept(made), user, acls)
	}
	return nil
}

// upsertSCRAM sets user's SCRAM-SHA-512 password on the cluster.
func upsertSCRAM(ctx context.Context, adm *kadm.Client, user, password string) error {
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("SCRAM credentials of %s: %w", user, err)
	}
	return nil
}

// createACLs creates the ACLs of grants for user (Kafka keeps one of each:
// creating it again changes nothing).
func createACLs(ctx context.Context, adm *kadm.Client, user string, grants []component.Grant) error {
	for _, g := range grants {
		b := kadm.NewACLs().Allow("User:" + user).AllowHosts().Operations(aclOperation(g.Operation)).
			ResourcePatternType(kadm.ACLPatternLiteral)
		if g.Prefix {
			b.ResourcePatternType(kadm.ACLPatternPrefixed)
		}
		onResource(b, aclResource(g.Resource), g.Name)
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("%v %s %s: %w", g.Operation, g.Resource, g.Name, r.Err)
			}
		}
	}
	return nil
}

// pruneACLs deletes user's ACLs that grants do not hold (what a component
// declared before an upgrade and no longer does), and returns how many.
func pruneACLs(ctx context.Context, adm *kadm.Client, user string, grants []component.Grant) (int, error) {
	type key struct {
		rt      kmsg.ACLResourceType
		name    string
		pattern kadm.ACLPattern
		op      kadm.ACLOperation
	}
	keyOf := func(g component.Grant) key {
		k := key{rt: aclResource(g.Resource), name: g.Name, pattern: kadm.ACLPatternLiteral, op: aclOperation(g.Operation)}
		if g.Prefix {
			k.pattern = kadm.ACLPatternPrefixed
		}
		if g.Resource == component.Cluster {
			k.name = component.ClusterName
		}
		return k
	}
	want := map[key]bool{}
	for _, g := range grants {
		want[keyOf(g)] = true
	}
	principal := "User:" + user
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow(principal).AllowHosts().AnyResource().
		ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range described {
		if r.Err != nil {
			return n, r.Err
		}
		for _, d := range r.Described {
			if d.Permission != kmsg.ACLPermissionTypeAllow || want[key{d.Type, d.Name, d.Pattern, d.Operation}] {
				continue
			}
			b := kadm.NewACLs().Allow(d.Principal).AllowHosts(d.Host).Operations(d.Operation).ResourcePatternType(d.Pattern)
			if !onResource(b, d.Type, d.Name) {
				continue // not a kind offerlog grants: someone else's
			}
			res, err := adm.DeleteACLs(ctx, b)
			if err == nil {
				for _, r := range res {
					err = errors.Join(err, r.Err)
				}
			}
			if err != nil {
				return n, fmt.Errorf("delete %v %v %s: %w", d.Operation, d.Type, d.Name, err)
			}
			n++
		}
	}
	return n, nil
}

// onResource names the resource of b; false for a type offerlog grants
// nothing on.
func onResource(b *kadm.ACLBuilder, rt kmsg.ACLResourceType, name string) bool {
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		b.Topics(name)
	case kmsg.ACLResourceTypeGroup:
		b.Groups(name)
	case kmsg.ACLResourceTypeTransactionalId:
		b.TransactionalIDs(name)
	case kmsg.ACLResourceTypeCluster:
		b.Clusters()
	default:
		return false
	}
	return true
}

func aclResource(r component.Resource) kmsg.ACLResourceType {
	return map[component.Resource]kmsg.ACLResourceType{
		component.Topic: kmsg.ACLResourceTypeTopic, component.Group: kmsg.ACLResourceTypeGroup,
		component.TransactionalID: kmsg.ACLResourceTypeTransactionalId, component.Cluster: kmsg.ACLResourceTypeCluster,
	}[r]
}

func aclOperation(o component.Operation) kadm.ACLOperation {
	return map[component.Operation]kadm.ACLOperation{
		component.Read: kadm.OpRead, component.Write: kadm.OpWrite, component.Describe: kadm.OpDescribe,
		component.Create: kadm.OpCreate, component.DescribeConfigs: kadm.OpDescribeConfigs,
		component.AlterConfigs: kadm.OpAlterConfigs, component.IdempotentWrite: kadm.OpIdempotentWrite,
	}[o]
}

func randomText(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// secretStore keeps named secrets of keys and values.
type secretStore interface {
	// get returns the secret's data, or ok false if there is none.
	get(ctx context.Context, name string) (data map[string][]byte, ok bool, err error)
	// create makes the secret; errExists if another made it first.
	create(ctx context.Context, name string, data map[string][]byte) error
	// replace puts data in place of the secret's, whole.
	replace(ctx context.Context, name string, data map[string][]byte) error
}

var errExists = errors.New("exists already")

// ensureSecret returns the secret name, made with make if there is none;
// made reports whether this call made it. Two inits racing keep the first.
func ensureSecret(ctx context.Context, s secretStore, name string, make func() (map[string][]byte, error)) (data map[string][]byte, made bool, err error) {
	if data, ok, err := s.get(ctx, name); err != nil || ok {
		return data, false, err
	}
	data, err = make()
	if err != nil {
		return nil, false, err
	}
	switch err := s.create(ctx, name, data); {
	case errors.Is(err, errExists):
		data, ok, err := s.get(ctx, name)
		if err == nil && !ok {
			err = fmt.Errorf("secret %s: created by another and gone again", name)
		}
		return data, false, err
	case err != nil:
		return nil, false, err
	}
	return data, true, nil
}

// dirSecrets keeps each secret as a directory of files, one per key.
type dirSecrets string

func (d dirSecrets) get(_ context.Context, name string) (map[string][]byte, bool, error) {
	entries, err := os.ReadDir(filepath.Join(string(d), name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("secret %s: %w", name, err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(string(d), name, e.Name())); err != nil {
			return nil, false, fmt.Errorf("secret %s: %w", name, err)
		} else {
			data[e.Name()] = b
		}
	}
	return data, true, nil
}

// create writes the keys into a temporary directory and renames it into
// place: a secret is there whole or not at all.
func (d dirSecrets) create(_ context.Context, name string, data map[string][]byte) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(string(d), "."+name+"-")
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	// Readable by the other users of the volume (Kafka's uid 1000, the
	// image's 10001): compose mounts it in its own services only. Keep
	// the directory itself where no one else reads.
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(tmp, k), v, 0o644); err != nil {
			return fmt.Errorf("secret %s: %w", name, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(string(d), name)); err != nil {
		if _, statErr := os.Stat(filepath.Join(string(d), name)); statErr == nil {
			return errExists // another made it first (rename onto a non-empty directory fails)
		}
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return nil
}

// replace writes the new secret beside the old one and swaps them: a
// reader finds one or the other whole (a container that mounts it, by
// compose's subpath, sees the new one when it starts again).
func (d dirSecrets) replace(ctx context.Context, name string, data map[string][]byte) error {
	dir := filepath.Join(string(d), name)
	old := filepath.Join(string(d), "."+name+"-replaced")
	_ = os.RemoveAll(old)
	if err := os.Rename(dir, old); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	if err := d.create(ctx, name, data); err != nil {
		_ = os.Rename(old, dir)
		return err
	}
	return os.RemoveAll(old)
}

func firstLineOf(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }

// kubeSecrets keeps secrets as Kubernetes Secrets through the API server,
// with the pod's service account (the manifests give the init Job a Role
// that may get and create Secrets in its namespace, nothing more).
type kubeSecrets struct {
	api, namespace, token string
	http                  *http.Client
}

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inClusterSecrets is the API server as a pod sees it. OFFERLOG_KUBE_API
// and OFFERLOG_KUBE_DIR replace the in-cluster address and the service
// account's directory (token, ca.crt): for tests, or a run from outside.
func inClusterSecrets(namespace string) (*kubeSecrets, error) {
	api := os.Getenv("OFFERLOG_KUBE_API")
	if api == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" {
			return nil, errors.New("--namespace: not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST); use --secrets-dir")
		}
		api = "https://" + net.JoinHostPort(host, port)
	}
	dir := serviceAccountDir
	if d := os.Getenv("OFFERLOG_KUBE_DIR"); d != "" {
		dir = d
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		return nil, fmt.Errorf("the service account's token: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("the service account's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the service account's CA (%s): no certificate", filepath.Join(dir, "ca.crt"))
	}
	return &kubeSecrets{api: strings.TrimSuffix(api, "/"), namespace: namespace, token: strings.TrimSpace(string(token)),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}, nil
}

// kubeSecret is the part of a v1 Secret this command reads and writes.
type kubeSecret struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Type string            `json:"type,omitempty"`
	Data map[string][]byte `json:"data"` // base64 in JSON, as the API has it
}

func (k *kubeSecrets) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, k.api+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("the Kubernetes API: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

func (k *kubeSecrets) get(ctx context.Context, name string) (map[string][]byte, bool, error) {
	code, body, err := k.do(ctx, http.MethodGet, "/api/v1/namespaces/"+k.namespace+"/secrets/"+name, nil)
	switch {
	case err != nil:
		return nil, false, err
	case code == http.StatusNotFound:
		return nil, false, nil
	case code != http.StatusOK:
		return nil, false, fmt.Errorf("get secret %s/%s: %d %s", k.namespace, name, code, firstLineOf(string(body)))
	}
	var s kubeSecret
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, false, fmt.Errorf("get secret %s/%s: %w", k.namespace, name, err)
	}
	return s.Data, true, nil
}

func (k *kubeSecrets) create(ctx context.Context, name string, data map[string][]byte) error {
	body, err := k.secret(name, data)
	if err != nil {
		return err
	}
	code, resp, err := k.do(ctx, http.MethodPost, "/api/v1/namespaces/"+k.namespace+"/secrets", body)
	switch {
	case err != nil:
		return err
	case code == http.StatusConflict:
		return errExists
	case code != http.StatusCreated && code != http.StatusOK:
		return fmt.Errorf("create secret %s/%s: %d %s", k.namespace, name, code, firstLineOf(string(resp)))
	}
	return nil
}

// replace updates the Secret (an unconditional update: init is its only
// writer).
func (k *kubeSecrets) replace(ctx context.Context, name string, data map[string][]byte) error {
	body, err := k.secret(name, data)
	if err != nil {
		return err
	}
	code, resp, err := k.do(ctx, http.MethodPut, "/api/v1/namespaces/"+k.namespace+"/secrets/"+name, body)
	switch {
	case err != nil:
		return err
	case code != http.StatusOK:
		return fmt.Errorf("update secret %s/%s: %d %s", k.namespace, name, code, firstLineOf(string(resp)))
	}
	return nil
}

// secret is the JSON of the Secret name holding data.
func (k *kubeSecrets) secret(name string, data map[string][]byte) ([]byte, error) {
	s := kubeSecret{APIVersion: "v1", Kind: "Secret", Type: "Opaque", Data: data}
	s.Metadata.Name, s.Metadata.Namespace = name, k.namespace
	s.Metadata.Labels = map[string]string{"app.kubernetes.io/managed-by": "offerlog-deploy-init"}
	return json.Marshal(s)
}
