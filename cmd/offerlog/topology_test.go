package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"

	"golang.org/x/time/rate"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/processors/cabinet/cabinettest"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// The topology test runs the production form on one machine: the
// processes the rendered Kubernetes manifests define, each as its own
// process with the command line, arguments and environment the manifests
// give it (addresses rewritten to local ones), against `offerlog broker`
// with SASL and a real ZooKeeper, under a steady mixed load and a seeded
// nemesis. As root each pod is a host of its own: a network namespace
// joined to the others by a bridge, which the nemesis can cut off.
//
// `make test` runs its short form; `make test-topology` the full one
// (OFFERLOG_TOPOLOGY=full): every Deployment rolled, more of every fault.
// OFFERLOG_TOPOLOGY_SEED repeats a run's choices; OFFERLOG_TOPOLOGY_STATIC=0
// runs the members without --instance-id (dynamic membership), to compare.

// topologyPartitions is the partitions of the short form's topics (the
// manifests' 16 in the full form): the processes share 2 cores with the
// rest of the suite.
const topologyPartitions = "4"

// cluster is the pods of a topology run and what they share.
type cluster struct {
	t        *testing.T
	bin      string
	zk       string // the ensemble's address
	net      *hostNet
	m        *manifests
	secrets  string
	broker   *brokerProcess
	brokers  *streams.Cluster  // the broker, as the test's clients reach it (with the credentials deploy init made)
	settings map[string]string // the ConfigMap's settings
	local    map[string]string // those of them rewritten to local ones
	extra    map[string]string // settings the run adds to every offerlog process (its stages file)
	static   bool

	mu   sync.Mutex
	pods []*pod
	// unexpected counts the exits the nemesis did not cause.
	unexpected map[string]int
}

// pod is one replica of a workload, run as a process.
type pod struct {
	name, component, workload string
	ip, ns                    string
	dir                       string // its emptyDirs
	container                 corev1.Container
	initContainers            []corev1.Container
	args                      []string
	env                       []string
	http                      string // the address of its --http
	ports                     map[int32]string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	expected bool // the nemesis stopped it
	stopped  bool // SIGSTOPped
}

func TestTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the production topology")
	}
	testkit.Tool(t, "java")
	full := os.Getenv("OFFERLOG_TOPOLOGY") == "full"
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OFFERLOG_TOPOLOGY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("topology: seed %d (OFFERLOG_TOPOLOGY_SEED=%d repeats it), full=%v", seed, seed, full)
	rng := rand.New(rand.NewPCG(seed, seed))

	c := &cluster{t: t, m: loadManifests(t), net: newHostNet(t), static: os.Getenv("OFFERLOG_TOPOLOGY_STATIC") != "0",
		unexpected: map[string]int{}}
	c.bin = filepath.Join(t.TempDir(), "offerlog")
	if out, err := exec.Command("go", "build", "-o", c.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c.secrets = t.TempDir()
	// The credentials first (the Kafka pods read them at start), then the
	// broker, then the init Job proper.
	// The brokers' certificate names the broker's address here.
	c.runOnce(t, "credentials", "deploy", "init", "--credentials-only", "--secrets-dir", c.secrets,
		"--kafka-hosts", c.net.hostIP+",localhost,127.0.0.1")
	brokerAddr := c.startBroker(t)
	// The test's own clients log in as the user deploy init made.
	kc, err := streams.LoadKafkaConfig(filepath.Join(c.secrets, "offerlog-kafka", "kafka.properties"))
	if err != nil {
		t.Fatal(err)
	}
	if c.brokers, err = streams.NewCluster([]string{brokerAddr}, kc.Credentials, streams.ClientSettings{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.brokers.Close)
	zk := testkit.ZooKeeperOn(t, c.net.hostIP)
	c.zk = zk
	timers := c.serveTimerStage(t)
	for name, cm := range c.m.configMaps {
		if strings.HasPrefix(name, "offerlog-settings") { // with kustomize's hash
			c.settings = maps.Clone(cm.Data)
		}
	}
	if c.settings == nil {
		t.Fatal("the manifests hold no offerlog-settings ConfigMap")
	}
	partitions := topologyPartitions
	if full {
		partitions = c.settings["OFFERLOG_PARTITIONS"]
	}
	c.local = map[string]string{"OFFERLOG_BROKERS": brokerAddr, "OFFERLOG_ZOOKEEPER": zk,
		"OFFERLOG_REPLICATION": "1", "OFFERLOG_PARTITIONS": partitions}
	t.Logf("topology: broker %s, ZooKeeper %s, %s partitions, pods on %s", brokerAddr, zk, partitions, c.net)

	start := time.Now()
	for _, w := range c.m.workloads {
		if w.kind == "Job" {
			c.runJob(t, w)
		}
	}
	for _, w := range c.m.workloads {
		if w.kind == "Job" || w.pod.Labels["app"] != "offerlog" || w.pod.Labels["component"] == "sink-ydb" {
			continue // sink-ydb needs YDB, which this machine has not
		}
		for i := range int(w.replicas) {
			c.addPod(t, w, i)
		}
	}
	ctx := testkit.Context(t, 40*time.Minute)
	c.startAll(ctx, c.pods)
	t.Logf("topology: %d pods ready in %v", len(c.pods), time.Since(start).Round(time.Millisecond))

	l := newTopologyLoad(t, c)
	if !full {
		// A steady load, not the most the pods take: the short form runs
		// beside the rest of make test on 2 cores.
		l.docWorkers, l.pace = 2, rate.NewLimiter(rate.Limit(150), 1)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := l.run(loadCtx)
	l.waitRate(t, 60*time.Second)
	time.Sleep(10 * time.Second) // the first fault's baseline: 10 s of load

	n := newNemesis(c, l, rng)
	if !full {
		n.watch = 30 * time.Second
	}
	n.killBroker(ctx)
	n.killPod(ctx, "offers")
	n.killPod(ctx, "numerator")               // one of the two masters, seals going on
	n.killPod(ctx, "cache")                   // a shard's replica, reads going on
	n.killPod(ctx, "scheduler")               // timers pending and firing
	n.stopPod(ctx, "indexer", 12*time.Second) // past the 10 s sessions
	if c.net.netns {
		n.isolate(ctx, "registry", 12*time.Second)
	}
	n.roll(ctx, "offerlog-offers")
	n.scale(ctx, "offerlog-offers", 3)
	if full {
		n.scale(ctx, "offerlog-offers", 1)
		n.killPod(ctx, "")
		n.killBroker(ctx)
		n.killPod(ctx, "registry")
		n.killPod(ctx, "api")
		n.stopPod(ctx, "offers", 15*time.Second)
		if c.net.netns {
			n.isolate(ctx, "offers", 15*time.Second)
			n.isolate(ctx, "cache", 15*time.Second)
		}
		for _, w := range c.m.workloads {
			if w.kind == "Deployment" && w.name != "offerlog-offers" && w.pod.Labels["component"] != "sink-ydb" {
				n.roll(ctx, w.name)
			}
		}
		n.scale(ctx, "offerlog-registry", 3)
		n.scale(ctx, "offerlog-registry", 1)
	}
	n.scale(ctx, "offerlog-offers", 2)
	stopLoad()
	<-loadDone

	c.checkAllReady(t)
	l.check(t, ctx)
	l.checkSearchFeed(t, c.brokers)
	parts, _ := strconv.Atoi(partitions)
	l.checkNumerator(t, int32(parts))
	c.checkCaches(t, l)
	timers.check(t, l)
	c.checkLagOnce(t)
	n.report(t)
	l.visitConsole(t)
	c.checkNoRefusals(t)
	c.checkReplay(t, brokerAddr)
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, k := range c.unexpected {
		t.Errorf("pod %s exited %d times by itself (the kubelet restarted it)", name, k)
	}
}

// replayTables are the tables `offerlog replay` rebuilds, by group, in the
// order replay takes them (offers before cabinet).
var replayTables = []struct{ group, table string }{
	{"registry", "registry-table"}, {"numerator", "numerator-table"}, {"offers", "offers-table"},
	{"drafts", "drafts-table"}, {"cabinet", "cabinet-table"},
}

// tableHistory describes every record of key on a table's changelog
// (the live run's, then the replay's), to say which write made a replayed
// value differ: its offset, headers and, for the registry's table, the
// record decoded.
func tableHistory(t *testing.T, brokers *streams.Cluster, table, key string) string {
	var b strings.Builder
	for _, r := range testkit.ReadAll(t, brokers, table) {
		if string(r.Key) != key {
			continue
		}
		fmt.Fprintf(&b, "  [%d]@%d %s", r.Partition, r.Offset, r.Timestamp.Format(time.RFC3339Nano))
		for _, h := range r.Headers {
			fmt.Fprintf(&b, " %s=%s", h.Key, h.Value)
		}
		var rec schemas.RegistryRecord
		if table == string(topics.RegistryTable) && r.Value != nil && schemas.RegistryRecords.Decode(r.Value, &rec) == nil {
			fmt.Fprintf(&b, " v%d %s source %d/%d verdicts", rec.Version, rec.Status, rec.SourcePartition, rec.SourceOffset)
			for _, v := range rec.RecentVerdicts {
				fmt.Fprintf(&b, " %d:%s", v.Offset, v.Verdict)
			}
		} else {
			fmt.Fprintf(&b, " %d bytes", len(r.Value))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// checkReplay stops every pod (a replay runs alone), reads the live
// tables, then runs `offerlog replay` of each group as an operator would,
// with the settings' environment, and compares each table with what it
// was, byte for byte.
func (c *cluster) checkReplay(t *testing.T, brokerAddr string) {
	var wg sync.WaitGroup
	for _, p := range c.podsOf("") {
		wg.Go(func() { c.stop(p, syscall.SIGTERM) })
	}
	wg.Wait()
	props := filepath.Join(c.secrets, "offerlog-kafka", "kafka.properties")
	brokers := c.brokers
	testkit.WaitGroupsEmpty(t, brokers, "registry", "numerator", "offers", "drafts", "cabinet")
	live := map[string]map[string][]byte{}
	for _, r := range replayTables {
		live[r.table] = testkit.Table(t, brokers, r.table)
	}
	sellers := cabinettest.Recount(t, live["offers-table"], live["cabinet-table"])
	t.Logf("topology: the cabinet of %d sellers equals a recount of %d offers", sellers, len(live["offers-table"]))
	records := 0
	for _, r := range replayTables {
		cmd := exec.Command(c.bin, "replay", r.group)
		cmd.Env = append(os.Environ(), "OFFERLOG_BROKERS="+brokerAddr, "OFFERLOG_KAFKA_CONFIG="+props, "OFFERLOG_DATA="+t.TempDir(),
			"OFFERLOG_PARTITIONS="+c.local["OFFERLOG_PARTITIONS"], "OFFERLOG_REPLICATION=1", "OFFERLOG_STAGES="+c.extra["OFFERLOG_STAGES"])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("offerlog replay %s: %v\n%s", r.group, err, out)
		}
		after := testkit.Table(t, brokers, r.table)
		if len(after) != len(live[r.table]) {
			t.Errorf("replay %s: %s has %d keys, had %d", r.group, r.table, len(after), len(live[r.table]))
		}
		differ := 0
		for k, v := range live[r.table] {
			if !bytes.Equal(v, after[k]) {
				if differ++; differ <= 3 {
					t.Errorf("replay %s: %s[%s] differs\n%s", r.group, r.table, k, tableHistory(t, brokers, r.table, k))
				} else {
					t.Errorf("replay %s: %s[%s] differs", r.group, r.table, k)
				}
			}
		}
		records += len(after)
	}
	t.Logf("topology: replays of %d groups rebuilt %d records, each as it was", len(replayTables), records)

	// offerlog's znodes are its own, as shipped (the Secret
	// offerlog-zookeeper): a session without the credentials can neither
	// list nor add to them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Setenv(zkconn.AuthEnv, "")
	t.Setenv(zkconn.AuthFileEnv, "")
	anon, _, err := zkconn.Dial(ctx, c.zk, 10*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if roots, _, err := anon.Children("/"); err != nil || !slices.Contains(roots, "offerlog") {
		t.Fatalf("ZooKeeper's root: %v %v, want offerlog's", roots, err)
	}
	if _, _, err := anon.Children("/offerlog"); !errors.Is(err, gozk.ErrNoAuth) {
		t.Errorf("a session without credentials listed /offerlog: %v, want ErrNoAuth", err)
	}
	if _, err := anon.Create("/offerlog/intruder", nil, 0, gozk.WorldACL(gozk.PermAll)); !errors.Is(err, gozk.ErrNoAuth) {
		t.Errorf("a session without credentials created under /offerlog: %v, want ErrNoAuth", err)
	}
}

// visitConsole opens every page of the console on an API pod, as an
// operator does: what each reads of the cluster, the API's Kafka user
// must be allowed (checkNoRefusals, next, reads the broker's log).
func (l *topologyLoad) visitConsole(t *testing.T) {
	for _, page := range []string{"", "/topics", "/groups", "/tables", "/scheduler", "/numerator", "/dead",
		"/dead?topic=" + topics.OffersDead, "/search?client=shop&q=bicycle"} {
		status, body, err := l.call(t.Context(), "GET", "/console"+page, "")
		if err != nil || status != http.StatusOK {
			t.Errorf("console %q: %d %v\n%.300s", page, status, err, body)
		}
	}
}

// checkNoRefusals fails on every refusal the broker logged: each pod logs
// in as its component's user (the manifests' Secret
// offerlog-kafka-COMPONENT), which deploy init allowed what the
// component's spec declares; a refusal is something it does that its spec
// does not say.
func (c *cluster) checkNoRefusals(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(c.broker.data, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if _, msg, ok := strings.Cut(line, "authorization failed: "); ok {
			msg, _, _ = strings.Cut(msg, `" component=`)
			seen[msg]++
		}
	}
	for msg, n := range seen {
		t.Errorf("the broker refused %s (%d times): the component's spec does not declare it", msg, n)
	}
	if len(seen) == 0 {
		t.Logf("topology: every pod logged in as its component's user over TLS; the broker refused none of them anything")
	}
	// And what a spec does not declare is refused: the registry's user
	// writing the aggregate's commands.
	kc, err := streams.LoadKafkaConfig(filepath.Join(c.secrets, componentSecret("registry"), "kafka.properties"))
	if err != nil {
		t.Fatal(err)
	}
	registry, err := streams.NewCluster([]string{c.broker.addr}, kc.Credentials, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer registry.Close()
	cl, err := registry.Client(kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.OffersCommands, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("the registry's user wrote %s: %v, want TOPIC_AUTHORIZATION_FAILED", topics.OffersCommands, err)
	}
}

// runOnce runs the binary to its end on the host, as a one-shot.
func (c *cluster) runOnce(t *testing.T, what string, args ...string) string {
	t.Helper()
	out, err := exec.Command(c.bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: offerlog %v: %v\n%s", what, args, err, out)
	}
	return string(out)
}

// startBroker starts `offerlog broker` with SASL and the user deploy init
// made (its kafka.properties is the broker's superuser's), on the bridge's
// address.
func (c *cluster) startBroker(t *testing.T) string {
	t.Helper()
	// The super user and the certificate deploy init made, as Kafka's
	// pods are given them: every client speaks TLS.
	data := startBrokerOf(t, c.secrets)
	tlsDir := filepath.Join(c.secrets, secretKafkaTLS)
	c.broker = &brokerProcess{data: data, addr: net.JoinHostPort(c.net.hostIP, freePort(t)),
		args: []string{"--tls-cert", filepath.Join(tlsDir, "tls.crt"), "--tls-key", filepath.Join(tlsDir, "tls.key"), "--tls-ca", filepath.Join(tlsDir, "ca.crt")}}
	c.broker.start(t, c.bin)
	t.Cleanup(func() { c.broker.stop(os.Interrupt) })
	return c.broker.addr
}

// brokerProcess is `offerlog broker`, run as a process of its own on its
// data directory and address, which the nemesis kills and starts again.
type brokerProcess struct {
	data, addr string
	args       []string // its TLS
	cmd        *exec.Cmd
	logf       *os.File
}

// start starts the broker and waits until it listens.
func (b *brokerProcess) start(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"broker", "--data", b.data, "--kafka-addr", b.addr}, b.args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(b.data, "broker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.cmd, b.logf = cmd, logf
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "embedded broker on") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the broker did not start in 60 s")
	}
}

// stop sends sig and waits for the process.
func (b *brokerProcess) stop(sig os.Signal) {
	_ = b.cmd.Process.Signal(sig)
	_ = b.cmd.Wait()
	b.logf.Close()
}

// runJob runs a Job's offerlog container to its end: deploy init, its
// --namespace (the API server's Secrets) given as --secrets-dir.
func (c *cluster) runJob(t *testing.T, w workload) {
	t.Helper()
	for _, ct := range offerlogContainers(w) {
		p := c.newPod(t, w, ct, w.name, nil)
		args := slices.Clone(p.args)
		if i := slices.Index(args, "--namespace"); i >= 0 && i+1 < len(args) {
			args = slices.Replace(args, i, i+2, "--secrets-dir", c.secrets)
		}
		cmd := c.command(p, args)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("Job %s: offerlog %v: %v\n%s", w.name, args, err, out)
		}
		t.Logf("Job %s: %s", w.name, strings.TrimSpace(string(out)))
	}
}

// addPod adds replica i of w, not started.
func (c *cluster) addPod(t *testing.T, w workload, i int) *pod {
	t.Helper()
	name := fmt.Sprintf("%s-%d", w.name, i)
	if w.kind == "Deployment" {
		// A Deployment's pods are named by their ReplicaSet and a random
		// suffix: a pod made again has a new name.
		name = fmt.Sprintf("%s-%05x", w.name, rand.Uint32()&0xfffff)
	}
	var main corev1.Container
	for _, ct := range w.pod.Spec.Containers {
		if ct.Name == "offerlog" {
			main = ct
		}
	}
	var inits []corev1.Container
	for _, ct := range w.pod.Spec.InitContainers {
		if strings.HasPrefix(ct.Image, "offerlog") {
			inits = append(inits, ct)
		}
	}
	p := c.newPod(t, w, main, name, inits)
	c.mu.Lock()
	c.pods = append(c.pods, p)
	c.mu.Unlock()
	return p
}

var (
	envRef   = regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`)
	portOnly = regexp.MustCompile(`^([0-9.]*):([0-9]+)$`)
)

// newPod makes the process of container ct of a pod of w named name: its
// host (a network namespace as root), its environment as the kubelet gives
// it (the ConfigMap, then env with field and secret references resolved,
// $(VAR) expanded), its volumes as directories, its ports on its address.
func (c *cluster) newPod(t *testing.T, w workload, ct corev1.Container, name string, inits []corev1.Container) *pod {
	t.Helper()
	p := &pod{name: name, component: w.pod.Labels["component"], workload: w.name, container: ct, initContainers: inits,
		dir: filepath.Join(t.TempDir(), name), ports: map[int32]string{}}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.ns, p.ip = c.net.add(t, name)
	for _, port := range ct.Ports {
		local := strconv.Itoa(int(port.ContainerPort))
		if !c.net.netns {
			local = freePort(t)
		}
		p.ports[port.ContainerPort] = net.JoinHostPort(p.ip, local)
	}
	p.args, p.env = c.rewrite(t, w, p, ct)
	for _, e := range p.env {
		if v, ok := strings.CutPrefix(e, "OFFERLOG_HTTP="); ok {
			p.http = v
		}
	}
	return p
}

// rewrite returns the arguments and environment of container ct in pod p.
func (c *cluster) rewrite(t *testing.T, w workload, p *pod, ct corev1.Container) ([]string, []string) {
	env := c.m.environment(t, p.name, ct, func(e corev1.EnvVar) string {
		switch {
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			return p.name
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			return p.ip
		case e.ValueFrom.FieldRef != nil && strings.HasPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.labels['"):
			return w.pod.Labels[strings.TrimSuffix(strings.TrimPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.labels['"), "']")]
		case e.ValueFrom.SecretKeyRef != nil:
			b, err := os.ReadFile(filepath.Join(c.secrets, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key))
			if err != nil {
				t.Fatalf("%s: %s: %v", p.name, e.Name, err)
			}
			return strings.TrimSpace(string(b))
		}
		t.Fatalf("%s: %s: a reference the topology test does not resolve", p.name, e.Name)
		return ""
	})
	for k, v := range c.local {
		if env[k] == c.settings[k] { // the ConfigMap's, not the container's own
			env[k] = v
		}
	}
	if !c.static {
		delete(env, "OFFERLOG_INSTANCE_ID")
	}
	// The volumes: a secret's files are under the secrets directory, an
	// emptyDir is a directory of the pod's.
	mounts := map[string]string{}
	for _, vm := range ct.VolumeMounts {
		for _, v := range w.pod.Spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case v.Secret != nil:
				mounts[vm.MountPath] = filepath.Join(c.secrets, v.Secret.SecretName)
			case v.EmptyDir != nil:
				mounts[vm.MountPath] = filepath.Join(p.dir, v.Name)
				if err := os.MkdirAll(mounts[vm.MountPath], 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	local := func(s string) string {
		s = envRef.ReplaceAllStringFunc(s, func(ref string) string {
			v, ok := env[envRef.FindStringSubmatch(ref)[1]]
			if !ok {
				return ref // as the kubelet leaves it
			}
			return v
		})
		for path, dir := range mounts {
			if s == path || strings.HasPrefix(s, path+"/") {
				return dir + strings.TrimPrefix(s, path)
			}
		}
		if m := portOnly.FindStringSubmatch(s); m != nil && (m[1] == "" || m[1] == p.ip) {
			port, _ := strconv.Atoi(m[2])
			if addr, ok := p.ports[int32(port)]; ok {
				return addr
			}
		}
		return s
	}
	for k, v := range env {
		env[k] = local(v)
	}
	maps.Copy(env, c.extra) // the host's paths, not the pod's
	args := make([]string, len(ct.Args))
	for i, a := range ct.Args {
		args[i] = local(a)
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return args, append(out, "PATH="+os.Getenv("PATH"), "HOME="+p.dir, "TMPDIR="+filepath.Join(p.dir, "tmp"))
}

// command is the process of args in pod p (in its network namespace).
func (c *cluster) command(p *pod, args []string) *exec.Cmd {
	var cmd *exec.Cmd
	if p.ns != "" {
		// ip netns exec execs the binary: the pid is offerlog's.
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.ns, c.bin}, args...)...)
	} else {
		cmd = exec.Command(c.bin, args...)
	}
	cmd.Env = p.env
	// A pod dies with the test (ip netns exec execs offerlog: the signal
	// holds for it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	_ = os.MkdirAll(filepath.Join(p.dir, "tmp"), 0o755)
	return cmd
}

// startAll starts pods (their init containers first, as a pod starts) and
// waits until every one is ready.
func (c *cluster) startAll(ctx context.Context, pods []*pod) {
	t := c.t
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			for _, ic := range p.initContainers {
				args, env := c.rewrite(t, workloadOf(c.m, p.workload), p, ic)
				cmd := c.command(p, args)
				cmd.Env = env // the init container's own
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("pod %s: init container %s: %v\n%s", p.name, ic.Name, err, out)
					return
				}
			}
			c.start(p)
		})
	}
	wg.Wait()
	for _, p := range pods {
		c.waitReady(ctx, p, 3*time.Minute)
	}
}

func workloadOf(m *manifests, name string) workload {
	for _, w := range m.workloads {
		if w.name == name {
			return w
		}
	}
	panic("no workload " + name)
}

// start starts p's container, and restarts it when it exits by itself, as
// the kubelet does (counted as unexpected).
func (c *cluster) start(p *pod) {
	t := c.t
	logf, err := os.OpenFile(filepath.Join(p.dir, "offerlog.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	cmd := c.command(p, p.args)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Errorf("pod %s: %v", p.name, err)
		logf.Close()
		return
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.expected, p.stopped = cmd, exited, false, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		close(exited)
		p.mu.Lock()
		expected := p.expected
		p.mu.Unlock()
		if !expected && !c.closing() {
			c.mu.Lock()
			c.unexpected[p.name]++
			c.mu.Unlock()
			t.Logf("pod %s exited by itself (%v); restarting it (%s)", p.name, err, tail(filepath.Join(p.dir, "offerlog.log"), 5))
			time.Sleep(time.Second) // the kubelet's back-off, at its shortest
			if !c.closing() {
				c.start(p)
			}
		}
	}()
	t.Cleanup(func() { c.stop(p, syscall.SIGKILL) })
}

// closing reports whether the test is over (its pods are being stopped).
func (c *cluster) closing() bool {
	select {
	case <-c.t.Context().Done():
		return true
	default:
		return false
	}
}

// stop signals p's container (SIGTERM: stopped on purpose, as a rollout or
// a scale-down does; SIGKILL: killed) and waits for it to exit.
func (c *cluster) stop(p *pod, sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	p.expected = true
	if p.stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	p.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		// terminationGracePeriodSeconds, then the kubelet kills.
		_ = cmd.Process.Kill()
		<-exited
	}
}

// ready reports whether p answers 200 on /readyz.
func (p *pod) ready() bool {
	resp, err := topologyHTTP.Get("http://" + p.http + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == 200
}

func (c *cluster) waitReady(ctx context.Context, p *pod, within time.Duration) time.Duration {
	start := time.Now()
	deadline := start.Add(within)
	for !p.ready() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.t.Fatalf("pod %s not ready in %v: %s", p.name, within, tail(filepath.Join(p.dir, "offerlog.log"), 15))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

func (c *cluster) podsOf(component string) []*pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*pod
	for _, p := range c.pods {
		if component == "" || p.component == component {
			out = append(out, p)
		}
	}
	return out
}

func (c *cluster) checkAllReady(t *testing.T) {
	for _, p := range c.podsOf("") {
		c.waitReady(t.Context(), p, 2*time.Minute)
	}
}

// checkLagOnce checks that one process of the cluster, the lag
// component's, reports the groups' lag.
func (c *cluster) checkLagOnce(t *testing.T) {
	var reporting []string
	for _, p := range c.podsOf("") {
		resp, err := topologyHTTP.Get("http://" + p.http + "/metrics")
		if err != nil {
			t.Errorf("pod %s: /metrics: %v", p.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "offerlog_kafka_consumer_group_topic_partition_lag{") {
			reporting = append(reporting, p.name)
		}
	}
	if len(reporting) != 1 || !strings.HasPrefix(reporting[0], "offerlog-lag-") {
		t.Errorf("the lag is reported by %v; want the lag component's pod alone", reporting)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// hostNet gives each pod a host: as root, a network namespace with an
// address on a bridge the test makes (the broker and ZooKeeper listen on
// the bridge's address); otherwise the loopback interface, ports told
// apart.
type hostNet struct {
	netns  bool
	hostIP string
	bridge string
	prefix string
	tag    string

	mu   sync.Mutex
	next int
}

func (h *hostNet) String() string {
	if h.netns {
		return fmt.Sprintf("hosts of their own (network namespaces on bridge %s, %s.0/24)", h.bridge, h.prefix)
	}
	return "the loopback interface (not root: no network namespaces, no link cut)"
}

func newHostNet(t *testing.T) *hostNet {
	h := &hostNet{hostIP: "127.0.0.1"}
	if os.Geteuid() != 0 || os.Getenv("OFFERLOG_TOPOLOGY_NETNS") == "0" {
		return h
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Logf("topology: no ip command (%v): pods share the loopback interface", err)
		return h
	}
	removeStaleHosts(t)
	id := os.Getpid()
	h.tag = strconv.Itoa(id)
	h.bridge = "olbr" + h.tag
	h.prefix = fmt.Sprintf("10.%d.%d", 200+id%50, id/50%250)
	h.hostIP = h.prefix + ".1"
	if err := ipCmd("link", "add", h.bridge, "type", "bridge"); err != nil {
		t.Logf("topology: cannot make a bridge (%v): pods share the loopback interface", err)
		return &hostNet{hostIP: "127.0.0.1"}
	}
	t.Cleanup(func() { _ = ipCmd("link", "del", h.bridge) })
	if err := errors.Join(ipCmd("addr", "add", h.hostIP+"/24", "dev", h.bridge), ipCmd("link", "set", h.bridge, "up")); err != nil {
		t.Fatalf("topology: bridge %s: %v", h.bridge, err)
	}
	h.netns = true
	return h
}

// removeStaleHosts deletes the bridges, links and namespaces of topology
// runs whose process is gone (a run killed before its cleanup).
func removeStaleHosts(t *testing.T) {
	gone := func(pid string) bool { _, err := os.Stat("/proc/" + pid); return err != nil }
	out, _ := exec.Command("ip", "-o", "link").Output()
	for _, m := range regexp.MustCompile(`(?m)^\d+: (ol(?:br|v)(\d+)(?:n\d+)?)[@:]`).FindAllStringSubmatch(string(out), -1) {
		if gone(m[2]) {
			_ = ipCmd("link", "del", m[1])
		}
	}
	out, _ = exec.Command("ip", "netns", "list").Output()
	for _, m := range regexp.MustCompile(`(?m)^(ol(\d+)-\d+)`).FindAllStringSubmatch(string(out), -1) {
		if gone(m[2]) {
			t.Logf("topology: removing network namespace %s of a run that is gone", m[1])
			_ = ipCmd("netns", "del", m[1])
		}
	}
}

// add makes pod name's host and returns its namespace ("" on loopback)
// and address.
func (h *hostNet) add(t *testing.T, name string) (ns, ip string) {
	if !h.netns {
		return "", "127.0.0.1"
	}
	h.mu.Lock()
	h.next++
	n := h.next
	h.mu.Unlock()
	if n > 250 {
		t.Fatal("topology: more than 250 hosts")
	}
	ns = fmt.Sprintf("ol%s-%d", h.tag, n)
	ip = fmt.Sprintf("%s.%d", h.prefix, n+1)
	veth := fmt.Sprintf("olv%sn%d", h.tag, n)
	err := errors.Join(
		ipCmd("netns", "add", ns),
		ipCmd("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns),
		ipCmd("link", "set", veth, "master", h.bridge, "up"),
		ipCmd("-n", ns, "addr", "add", ip+"/24", "dev", "eth0"),
		ipCmd("-n", ns, "link", "set", "eth0", "up"),
		ipCmd("-n", ns, "link", "set", "lo", "up"))
	t.Cleanup(func() { _ = ipCmd("netns", "del", ns); _ = ipCmd("link", "del", veth) })
	if err != nil {
		t.Fatalf("topology: host %s (%s): %v", name, ns, err)
	}
	return ns, ip
}

// link takes a pod's host off the network (down) or back (up).
func (h *hostNet) link(ns string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipCmd("-n", ns, "link", "set", "eth0", state)
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
