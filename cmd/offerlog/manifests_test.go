package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
)

// manifests is the example overlay rendered and decoded into the API's
// types, by kind.
type manifests struct {
	raw          string
	configMaps   map[string]*corev1.ConfigMap
	services     []*corev1.Service
	workloads    []workload
	pdbs         []*policyv1.PodDisruptionBudget
	policies     []*networkingv1.NetworkPolicy
	roles        []*rbacv1.Role
	baseImageTag string
}

// workload is a Deployment, StatefulSet or Job: its pods' template.
type workload struct {
	kind, name string
	replicas   int32
	selector   map[string]string
	pod        corev1.PodTemplateSpec
}

func (w workload) String() string { return w.kind + " " + w.name }

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	rendered := renderKustomize(t, overlay)
	m := &manifests{raw: string(rendered), configMaps: map[string]*corev1.ConfigMap{}}
	for _, d := range decodeDocs(t, rendered) {
		js, _ := json.Marshal(d)
		into := func(v any) {
			if err := json.Unmarshal(js, v); err != nil {
				t.Fatal(err)
			}
		}
		switch d["kind"] {
		case "ConfigMap":
			var o corev1.ConfigMap
			into(&o)
			m.configMaps[o.Name] = &o
		case "Service":
			var o corev1.Service
			into(&o)
			m.services = append(m.services, &o)
		case "Deployment":
			var o appsv1.Deployment
			into(&o)
			m.workloads = append(m.workloads, workload{"Deployment", o.Name, *o.Spec.Replicas, o.Spec.Selector.MatchLabels, o.Spec.Template})
		case "StatefulSet":
			var o appsv1.StatefulSet
			into(&o)
			m.workloads = append(m.workloads, workload{"StatefulSet", o.Name, *o.Spec.Replicas, o.Spec.Selector.MatchLabels, o.Spec.Template})
		case "Job":
			var o batchv1.Job
			into(&o)
			m.workloads = append(m.workloads, workload{"Job", o.Name, 1, nil, o.Spec.Template})
		case "PodDisruptionBudget":
			var o policyv1.PodDisruptionBudget
			into(&o)
			m.pdbs = append(m.pdbs, &o)
		case "NetworkPolicy":
			var o networkingv1.NetworkPolicy
			into(&o)
			m.policies = append(m.policies, &o)
		case "Role":
			var o rbacv1.Role
			into(&o)
			m.roles = append(m.roles, &o)
		}
	}
	base, err := os.ReadFile("../../deploy/k8s/base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if mm := regexp.MustCompile(`(?m)^\s*newTag:\s*(\S+)`).FindStringSubmatch(string(base)); mm != nil {
		m.baseImageTag = mm[1]
	}
	return m
}

// environment returns a container's environment as the kubelet gives it:
// its envFrom ConfigMaps, then its env (values; a field or secret
// reference is given as resolve returns it).
func (m *manifests) environment(t *testing.T, where string, c corev1.Container, resolve func(corev1.EnvVar) string) map[string]string {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		cm, ok := m.configMaps[from.ConfigMapRef.Name]
		if !ok {
			t.Errorf("%s: envFrom ConfigMap %s, which the manifests do not hold", where, from.ConfigMapRef.Name)
			continue
		}
		maps.Copy(env, cm.Data)
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = resolve(e)
		} else {
			env[e.Name] = e.Value
		}
	}
	return env
}

// offerlogContainers returns the workload's containers that run offerlog.
func offerlogContainers(w workload) []corev1.Container {
	var out []corev1.Container
	for _, c := range append(slices.Clone(w.pod.Spec.InitContainers), w.pod.Spec.Containers...) {
		if strings.HasPrefix(c.Image, "offerlog") {
			out = append(out, c)
		}
	}
	return out
}

// TestKubernetesManifests checks the manifests the example overlay renders
// as a cluster would run them: every offerlog container's command line,
// with the environment the ConfigMap and its env give it, is one this
// binary takes; it listens on the ports it declares and is probed on its
// --http port; every Service targets a port of its pods; every component
// runs, with the same partitions and brokers, written once.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	components := map[string]bool{}
	podPorts := map[string][]int32{}
	for _, w := range m.workloads {
		for _, c := range offerlogContainers(w) {
			where := fmt.Sprintf("%s container %s", w, c.Name)
			env := m.environment(t, where, c, func(e corev1.EnvVar) string { return "10.0.0.1" })
			args := slices.Clone(c.Args)
			for i, a := range args {
				args[i] = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(a, func(v string) string {
					name := strings.TrimSuffix(strings.TrimPrefix(v, "$("), ")")
					if _, ok := env[name]; !ok {
						t.Errorf("%s: %s names %s, which its environment lacks", where, a, name)
					}
					return "pod-0"
				})
			}
			// The command line as the process sees it: the environment's
			// settings (offerlog reads OFFERLOG_<FLAG>), then args.
			ports := commandLineIn(t, where, args, env)
			if len(args) > 1 && args[0] == "run" && c.Name == "offerlog" {
				components[args[1]] = true
				for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.IntValue() != ports["--http"] {
						t.Errorf("%s: probes must be HTTP on the --http port %d", where, ports["--http"])
					}
				}
				if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
					c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("%s: readiness must be /readyz, liveness /healthz", where)
				}
				if env["OFFERLOG_PARTITIONS"] == "" || env["OFFERLOG_BROKERS"] == "" || env["OFFERLOG_KAFKA_CONFIG"] == "" {
					t.Errorf("%s: the settings' brokers, partitions and Kafka credentials are not in its environment", where)
				}
			}
			for _, p := range c.Ports {
				if !has(ports, int(p.ContainerPort)) {
					t.Errorf("%s declares port %d, which it does not listen on (%v)", where, p.ContainerPort, ports)
				}
				podPorts[w.pod.Labels["component"]] = append(podPorts[w.pod.Labels["component"]], p.ContainerPort)
			}
		}
	}
	for _, s := range m.services {
		comp := s.Spec.Selector["component"]
		if comp == "" {
			continue // not offerlog's
		}
		for _, p := range s.Spec.Ports {
			if !slices.Contains(podPorts[comp], p.TargetPort.IntVal) {
				t.Errorf("Service %s targets port %d, which no %s pod declares (%v)", s.Name, p.TargetPort.IntVal, comp, podPorts[comp])
			}
		}
	}
	for _, c := range platform.AllComponents() {
		if !components[c] {
			t.Errorf("the manifests run no %s", c)
		}
	}
	// Settings written once: the broker list and the partitions appear in
	// the settings ConfigMap and nowhere else.
	for _, setting := range []string{"kafka-0.kafka:9092,kafka-1.kafka:9092,kafka-2.kafka:9092", "--partitions", "--brokers"} {
		if n := strings.Count(m.raw, setting); n > 1 || (n == 1 && strings.HasPrefix(setting, "--")) {
			t.Errorf("%q is written %d times in the rendered manifests; the settings ConfigMap holds it once", setting, n)
		}
	}
}

// TestKubernetesManifestsAreSecure checks the properties a cluster that
// enforces them would check, on the rendered manifests: Pod Security
// "restricted" for every pod, requests and limits for every container,
// disruption budgets, the quorums' Services, Kafka's SASL and readiness,
// the Secrets deploy init makes, a NetworkPolicy, and one version.
func TestKubernetesManifestsAreSecure(t *testing.T) {
	m := loadManifests(t)
	if m.baseImageTag == "" {
		t.Fatal("the base names no image tag (images: newTag)")
	}
	secretsUsed := map[string]bool{}
	for _, w := range m.workloads {
		ps := w.pod.Spec
		// Replicas on different nodes where the cluster has them, and
		// every long-running container restarted when it stops answering
		// (offerlog's only after its start, which may restore a store).
		if w.kind != "Job" && w.replicas > 1 && w.pod.Labels["app"] == "offerlog" && !slices.ContainsFunc(ps.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
			return c.TopologyKey == "kubernetes.io/hostname" && slices.Contains(c.MatchLabelKeys, "component")
		}) {
			t.Errorf("%s: %d replicas and no spread over nodes by component", w, w.replicas)
		}
		if w.kind != "Job" {
			for _, c := range ps.Containers {
				if c.LivenessProbe == nil {
					t.Errorf("%s container %s: no liveness probe", w, c.Name)
				}
				if strings.HasPrefix(c.Image, "offerlog") && c.StartupProbe == nil {
					t.Errorf("%s container %s: no startup probe (a restore may outlast the liveness probe)", w, c.Name)
				}
			}
		}
		psc := ps.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
			where := fmt.Sprintf("%s container %s", w, c.Name)
			sc := c.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
			uid := sc.RunAsUser
			if uid == nil {
				uid = psc.RunAsUser
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = psc.SeccompProfile
			}
			switch {
			case !nonRoot || uid == nil || *uid == 0:
				t.Errorf("%s: not runAsNonRoot with a non-zero runAsUser", where)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s: capabilities must drop ALL and add none", where)
			case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("%s: no RuntimeDefault seccomp profile", where)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s: the root filesystem is writable", where)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: want cpu and memory requests and a memory limit, have %v", where, c.Resources)
			}
			if strings.HasPrefix(c.Image, "offerlog") && c.Image != "offerlog:"+m.baseImageTag {
				t.Errorf("%s: image %s, while the base names offerlog:%s", where, c.Image, m.baseImageTag)
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secretsUsed[e.ValueFrom.SecretKeyRef.Name] = true
					if e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional {
						t.Errorf("%s: secret %s is optional: the pod would start without it", where, e.ValueFrom.SecretKeyRef.Name)
					}
				}
			}
		}
		for _, v := range ps.Volumes {
			if v.Secret != nil {
				secretsUsed[v.Secret.SecretName] = true
			}
			// a component logs in to Kafka as its own user, no other's
			if c := w.pod.Labels["component"]; v.Name == "kafka" && w.pod.Labels["app"] == "offerlog" &&
				(v.Secret == nil || v.Secret.SecretName != componentSecret(c)) {
				t.Errorf("%s: its volume kafka is not the Secret %s", w, componentSecret(c))
			}
			if v.HostPath != nil {
				t.Errorf("%s: a hostPath volume", w)
			}
		}
		if ps.HostNetwork || ps.HostPID || ps.HostIPC {
			t.Errorf("%s: shares a host namespace", w)
		}
		if w.kind != "Job" && w.replicas > 1 && !slices.ContainsFunc(m.pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			return p.Spec.Selector != nil && labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(labels.Set(w.pod.Labels))
		}) {
			t.Errorf("%s: %d replicas and no PodDisruptionBudget", w, w.replicas)
		}
		if w.kind == "Job" && !strings.HasSuffix(w.name, "-"+strings.ReplaceAll(m.baseImageTag, ".", "-")) {
			t.Errorf("%s: a Job's template is immutable: name it by version (-%s)", w, strings.ReplaceAll(m.baseImageTag, ".", "-"))
		}
		if w.name == "kafka" {
			for _, c := range ps.Containers {
				if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil {
					t.Errorf("%s: Kafka's readiness must ask the broker (exec), not open a TCP connection", w)
				}
			}
		}
	}
	made := []string{secretKafka, secretKafkaTLS, secretTokens, secretZooKeeper}
	for _, c := range platform.AllComponents() {
		made = append(made, componentSecret(c))
	}
	for _, s := range made {
		if !secretsUsed[s] {
			t.Errorf("no pod reads the Secret %s that deploy init makes", s)
		}
	}
	for s := range secretsUsed {
		if !slices.Contains(made, s) {
			t.Errorf("a pod reads the Secret %s, which nothing makes (a hand step)", s)
		}
	}
	for _, s := range m.services {
		if (s.Name == "kafka" || s.Name == "zookeeper") && !s.Spec.PublishNotReadyAddresses {
			t.Errorf("Service %s: a quorum's peers must resolve before they are ready (publishNotReadyAddresses)", s.Name)
		}
	}
	// Kafka's start.sh is run by TestKafkaStartsSecure.
	kafkaPolicy := false
	for _, p := range m.policies {
		if p.Spec.PodSelector.MatchLabels["app"] != "kafka" {
			continue
		}
		for _, r := range p.Spec.Ingress {
			for _, port := range r.Ports {
				if port.Port.IntVal == 9093 {
					kafkaPolicy = len(r.From) == 1 && r.From[0].PodSelector != nil && r.From[0].PodSelector.MatchLabels["app"] == "kafka"
				}
			}
		}
	}
	if !kafkaPolicy {
		t.Error("no NetworkPolicy keeps Kafka's controller listener to the brokers")
	}
	for _, r := range m.roles {
		for _, rule := range r.Rules {
			if !slices.Equal(rule.Resources, []string{"secrets"}) || slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "create" && v != "update" }) {
				t.Errorf("Role %s: %v: the init Job needs get, create and update on Secrets, nothing more", r.Name, rule)
			}
		}
	}
	// One version: compose's image and build argument are the base's tag
	// too (make deploy-version writes them all).
	compose, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`offerlog:\$\{OFFERLOG_VERSION:-([^}]+)\}`, `(?m)^ +VERSION: *(\S+)$`} {
		ms := regexp.MustCompile(re).FindAllStringSubmatch(string(compose), -1)
		if len(ms) == 0 {
			t.Errorf("compose.yaml: nothing matches %s", re)
		}
		for _, mm := range ms {
			if mm[1] != m.baseImageTag {
				t.Errorf("compose.yaml names version %s, the k8s base %s", mm[1], m.baseImageTag)
			}
		}
	}
	if !strings.Contains(m.raw, "pod-security.kubernetes.io/enforce: restricted") {
		t.Error("the namespace does not enforce Pod Security restricted")
	}
}
