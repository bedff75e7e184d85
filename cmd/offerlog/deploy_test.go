package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"go.yaml.in/yaml/v3"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
)

// listenFlags name the flags that make a process listen on a port.
var listenFlags = []string{"--http", "--grpc", "--cache-grpc", "--kafka-addr"}

// commandLine checks that args is an offerlog command line this binary
// takes (command, component and every flag), and returns the ports it
// listens on, by flag.
func commandLine(t *testing.T, where string, args []string) map[string]int {
	t.Helper()
	if len(args) == 0 {
		t.Errorf("%s: no command", where)
		return nil
	}
	if args[0] == "run" && (len(args) < 2 || !slices.Contains(platform.AllComponents(), args[1])) {
		t.Errorf("%s: run of unknown component %v (have %v)", where, args, platform.AllComponents())
	}
	// $(VAR) is the orchestrator's to expand.
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = regexp.MustCompile(`\$\([A-Z_]+\)`).ReplaceAllString(a, "10.0.0.1")
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), append(expanded, "--help"), nil, io.Discard, &stderr); code != 0 {
		t.Errorf("%s: offerlog %s: exit %d: %s", where, strings.Join(args, " "), code, firstLineOf(stderr.String()))
	}
	ports := map[string]int{}
	for i := 0; i+1 < len(args); i++ {
		if slices.Contains(listenFlags, args[i]) {
			v := args[i+1]
			p, err := strconv.Atoi(v[strings.LastIndexByte(v, ':')+1:])
			if err != nil {
				t.Errorf("%s: %s %s has no port", where, args[i], v)
			}
			ports[args[i]] = p
		}
	}
	return ports
}

// commandLineIn is commandLine run in the process's environment env: its
// OFFERLOG_<FLAG> settings are the flags' defaults, as offerlog reads them,
// and a listening flag set only there counts among the ports.
func commandLineIn(t *testing.T, where string, args []string, env map[string]string) map[string]int {
	t.Helper()
	for k, v := range env {
		if strings.HasPrefix(k, "OFFERLOG_") {
			t.Setenv(k, v)
		}
	}
	ports := commandLine(t, where, args)
	for k := range env {
		if strings.HasPrefix(k, "OFFERLOG_") {
			os.Unsetenv(k) // the next command line has its own
		}
	}
	for _, flag := range listenFlags {
		v, ok := env["OFFERLOG_"+strings.ToUpper(strings.TrimPrefix(flag, "--"))]
		if !ok || ports[flag] != 0 {
			continue
		}
		p, err := strconv.Atoi(v[strings.LastIndexByte(v, ':')+1:])
		if err != nil {
			t.Errorf("%s: %s=%s has no port", where, flag, v)
		}
		ports[flag] = p
	}
	return ports
}

func has(ports map[string]int, p int) bool {
	for _, q := range ports {
		if q == p {
			return true
		}
	}
	return false
}

// TestComposeFile checks deploy/compose.yaml: every offerlog service runs a
// command line of this binary, publishes only ports it listens on, and
// checks its health on its --http port.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string   `yaml:"image"`
			Command     []string `yaml:"command"`
			Ports       []string `yaml:"ports"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn   map[string]any    `yaml:"depends_on"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []composeVolume   `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	components := map[string]bool{}
	for name, s := range compose.Services {
		for dep := range s.DependsOn {
			if _, ok := compose.Services[dep]; !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			}
		}
		if strings.HasPrefix(s.Image, "apache/kafka") {
			// The log on a volume (the image keeps it in /tmp by default),
			// and a listener published for clients outside compose.
			// deploy/k8s/base/kafka/start.sh writes log.dirs.
			const dir = "/var/lib/kafka/data"
			if !slices.ContainsFunc(s.Volumes, func(v composeVolume) bool { return v.Target == dir }) {
				t.Errorf("compose %s: log dirs %q are not on a volume (%v)", name, dir, s.Volumes)
			}
			if len(s.Ports) == 0 || !strings.HasPrefix(s.Environment["KAFKA_EXTERNAL"], "localhost:") {
				t.Errorf("compose %s: no listener published for clients on the host", name)
			}
			if s.Environment["KAFKA_PASSWORD_FILE"] == "" {
				t.Errorf("compose %s: no SCRAM user's password (KAFKA_PASSWORD_FILE)", name)
			}
			if !slices.Contains(s.Volumes, composeVolume{Source: "secrets", Target: "/etc/kafka-tls", Subpath: secretKafkaTLS}) {
				t.Errorf("compose %s: no certificate (Secret %s at start.sh's /etc/kafka-tls)", name, secretKafkaTLS)
			}
		}
		if !strings.HasPrefix(s.Image, "offerlog") {
			continue
		}
		ports := commandLineIn(t, "compose "+name, s.Command, s.Environment)
		if len(s.Command) > 1 && s.Command[0] == "run" {
			components[s.Command[1]] = true
			// its own Kafka user's secret and ZooKeeper's, no other
			for _, v := range s.Volumes {
				if v.Source == "secrets" && v.Subpath != componentSecret(s.Command[1]) && v.Subpath != secretZooKeeper {
					t.Errorf("compose %s mounts the secrets %q: only %s and %s are its", name, v.Subpath, componentSecret(s.Command[1]), secretZooKeeper)
				}
			}
		}
		for _, p := range s.Ports {
			c, err := strconv.Atoi(p[strings.LastIndexByte(p, ':')+1:])
			if err != nil || !has(ports, c) {
				t.Errorf("compose %s publishes %s, which it does not listen on (%v)", name, p, ports)
			}
		}
		// the binary asks its own process's /readyz, on the --http it
		// reads from the same environment (TestHealthAsksTheProcess)
		if s.Command[0] == "run" && !slices.Equal(s.Healthcheck.Test, []string{"CMD", "offerlog", "health"}) {
			t.Errorf("compose %s: health check %q is not the binary's own (CMD offerlog health)", name, s.Healthcheck.Test)
		}
	}
	for _, c := range platform.AllComponents() {
		if !components[c] {
			t.Errorf("compose runs no %s", c)
		}
	}
}

// composeVolume is a service's volume in either of compose's syntaxes.
type composeVolume struct {
	Source, Target, Subpath string
}

func (v *composeVolume) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode { // source:target[:mode]
		parts := strings.Split(n.Value, ":")
		if len(parts) < 2 {
			return fmt.Errorf("volume %q: want source:target", n.Value)
		}
		v.Source, v.Target = parts[0], parts[1]
		return nil
	}
	var long struct {
		Source, Target string
		Volume         struct{ Subpath string }
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	v.Source, v.Target, v.Subpath = long.Source, long.Target, long.Volume.Subpath
	return nil
}

// definedMetrics returns the names of the metrics offerlog's code
// registers: every "offerlog_..." string literal of its non-test sources.
func definedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`"(offerlog_[a-z_]+)"`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range re.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// usedMetrics returns the offerlog metrics an expression reads, without
// the series suffixes of histograms.
func usedMetrics(expr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`offerlog_[a-z_]+`).FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(m, "_seconds"+suffix) {
				m = strings.TrimSuffix(m, suffix)
			}
		}
		out = append(out, m)
	}
	return out
}

// alertGroups are Prometheus rule groups, as alerts.yaml holds them and a
// PrometheusRule's spec (the monitoring component's) does.
type alertGroups struct {
	Groups []struct {
		Name  string `yaml:"name" json:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert" json:"alert"`
			Expr        string            `yaml:"expr" json:"expr"`
			For         string            `yaml:"for" json:"for,omitempty"`
			Labels      map[string]string `yaml:"labels" json:"labels"`
			Annotations map[string]string `yaml:"annotations" json:"annotations"`
		} `yaml:"rules" json:"rules"`
	} `yaml:"groups" json:"groups"`
}

// TestAlertsAndDashboard checks deploy/prometheus/alerts.yaml and
// deploy/k8s/components/monitoring/offerlog.json: rules and panels are well formed and read
// only metrics offerlog registers.
func TestAlertsAndDashboard(t *testing.T) {
	defined := definedMetrics(t)
	var rules alertGroups
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: want alert, expr, a severity label and a summary", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("rule %s: unbalanced parentheses in %q", r.Alert, r.Expr)
			}
			for _, m := range usedMetrics(r.Expr) {
				if !defined[m] {
					t.Errorf("rule %s reads %s, which offerlog does not register", r.Alert, m)
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("%d alert rules", n)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err = os.ReadFile("../../deploy/k8s/components/monitoring/offerlog.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil || dash.Title == "" || len(dash.Panels) < 5 {
		t.Fatalf("offerlog.json: %v, %d panels", err, len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if strings.Count(q.Expr, "(") != strings.Count(q.Expr, ")") {
				t.Errorf("panel %q: unbalanced parentheses in %q", p.Title, q.Expr)
			}
			for _, m := range usedMetrics(q.Expr) {
				if !defined[m] {
					t.Errorf("panel %q reads %s, which offerlog does not register", p.Title, m)
				}
			}
		}
	}
}

// TestComposeConfig loads deploy/compose.yaml as docker compose config does,
// with compose-go (the loader of docker compose itself): it must validate
// against the Compose specification, and its services must depend on what
// they need with conditions.
func TestComposeConfig(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"../../deploy/compose.yaml"}, cli.WithName("offerlog"))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker compose config would refuse deploy/compose.yaml: %v", err)
	}
	initSvc, ok := project.Services["init"]
	if !ok {
		t.Fatal("no one-shot init service (offerlog deploy init)")
	}
	for _, k := range []string{"kafka-1", "kafka-2", "kafka-3"} {
		if d, ok := initSvc.DependsOn[k]; !ok || d.Condition != "service_healthy" {
			t.Errorf("the init service must wait for %s to be healthy", k)
		}
		if d, ok := project.Services[k].DependsOn["credentials"]; !ok || d.Condition != "service_completed_successfully" {
			t.Errorf("%s must start after the credentials service made its user", k)
		}
	}
	for name, svc := range project.Services {
		if name == "init" || name == "credentials" {
			continue // one-shots: nothing to check the health of
		}
		if svc.HealthCheck == nil {
			t.Errorf("service %s has no healthcheck", name)
		}
		if len(svc.Command) < 2 || svc.Command[0] != "run" {
			continue
		}
		if d, ok := svc.DependsOn["init"]; !ok || d.Condition != "service_completed_successfully" {
			t.Errorf("service %s must start after the init service completed", name)
		}
		if !svc.ReadOnly || !slices.Contains(svc.CapDrop, "ALL") {
			t.Errorf("service %s: want a read-only root filesystem and every capability dropped", name)
		}
	}
	for _, v := range []string{"kafka-1", "kafka-2", "kafka-3"} {
		if _, ok := project.Volumes[v]; !ok {
			t.Errorf("no named volume %s for Kafka's log", v)
		}
	}
}
