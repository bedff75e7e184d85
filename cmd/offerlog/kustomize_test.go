package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// overlay is the kustomization the deploy tests render: the example
// overlay of deploy/k8s/base.
const overlay = "../../deploy/k8s/overlays/example"

// renderKustomize renders a kustomization as kubectl apply -k does, with
// kustomize's own library.
func renderKustomize(t *testing.T, dir string) []byte {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeDocs returns the YAML documents of rendered, each as the generic
// map YAML decodes to.
func decodeDocs(t *testing.T, rendered []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(rendered))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
}

// kubeTypes are the Kubernetes objects the manifests hold, by apiVersion
// and kind: each is decoded strictly into its type from k8s.io/api.
var kubeTypes = map[string]func() any{
	"v1/Namespace":                             func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"v1/Service":                               func() any { return &corev1.Service{} },
	"apps/v1/Deployment":                       func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                             func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/Ingress":             func() any { return &networkingv1.Ingress{} },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"v1/ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"monitoring.coreos.com/v1/PodMonitor":      func() any { return &podMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule":  func() any { return &prometheusRule{} },
}

// prometheusRule is the part of the Prometheus Operator's PrometheusRule
// the manifests use.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       alertGroups       `json:"spec"`
}

// monitoring is the component of the Prometheus Operator's objects.
const monitoring = "../../deploy/k8s/components/monitoring"

// withMonitoring returns a kustomization of the example overlay with the
// monitoring component, as a cluster with the Operator deploys it.
func withMonitoring(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	abs := func(p string) string { // relative to dir: kustomize takes no absolute root
		a, err := filepath.Abs(p)
		if err == nil {
			a, err = filepath.Rel(dir, a)
		}
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n", abs(overlay), abs(monitoring))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTheBaseNeedsNoCRD: the example overlay (the base) holds Kubernetes'
// own kinds only, so kubectl apply -k works on a bare cluster; with the
// monitoring component it adds the PodMonitor, the PrometheusRule and the
// dashboard's ConfigMap.
func TestTheBaseNeedsNoCRD(t *testing.T) {
	for _, d := range decodeDocs(t, renderKustomize(t, overlay)) {
		if v, _ := d["apiVersion"].(string); strings.Contains(v, "monitoring.coreos.com") {
			t.Errorf("the base holds a %s %v: a cluster without the Operator's CRDs refuses it", d["kind"], d["metadata"])
		}
	}
	found := map[string]bool{}
	for _, d := range decodeDocs(t, renderKustomize(t, withMonitoring(t))) {
		name, _ := d["metadata"].(map[string]any)["name"].(string)
		if d["kind"] == "ConfigMap" && strings.HasPrefix(name, "offerlog-dashboard") {
			labels, _ := d["metadata"].(map[string]any)["labels"].(map[string]any)
			data, _ := d["data"].(map[string]any)
			found["dashboard"] = labels["grafana_dashboard"] == "1" && data["offerlog.json"] != nil
		}
		found[fmt.Sprint(d["kind"])] = true
	}
	for _, want := range []string{"PodMonitor", "PrometheusRule", "dashboard"} {
		if !found[want] {
			t.Errorf("the monitoring component renders no %s", want)
		}
	}
}

// TestPrometheusRuleIsTheAlerts: the component's PrometheusRule is
// deploy/prometheus/alerts.yaml (which promtool tests), generated; with
// OFFERLOG_UPDATE=1 the test writes it.
func TestPrometheusRuleIsTheAlerts(t *testing.T) {
	alerts, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# Generated from deploy/prometheus/alerts.yaml (TestPrometheusRuleIsTheAlerts,\n" +
		"# OFFERLOG_UPDATE=1 writes it): edit the alerts there.\n" +
		"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: offerlog\n  namespace: offerlog\n" +
		"  labels:\n    app: offerlog\nspec:\n")
	for _, line := range strings.Split(strings.TrimRight(string(alerts), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue // the file's own comment
		}
		if line == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("  " + line + "\n")
	}
	path := filepath.Join(monitoring, "prometheusrule.yaml")
	if os.Getenv("OFFERLOG_UPDATE") != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != b.String() {
		t.Errorf("%s is not deploy/prometheus/alerts.yaml as a PrometheusRule (%v): OFFERLOG_UPDATE=1 go test -run TestPrometheusRuleIsTheAlerts ./cmd/offerlog", path, err)
	}
}

// podMonitor is the part of the Prometheus Operator's PodMonitor the
// manifests use (its types are not a dependency of offerlog).
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		JobLabel            string               `json:"jobLabel"`
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// TestKubernetesManifestsAreValid renders the overlay with kustomize and
// checks every object against the Kubernetes API's types (an unknown or
// misspelt field, a wrong type or an unknown kind fails), and what the API
// server would refuse: a selector that does not select its pods, a
// container without a name or an image. It is the check kubeconform makes
// with the Kubernetes schemas, which this machine cannot download.
func TestKubernetesManifestsAreValid(t *testing.T) {
	kinds := map[string]int{}
	var waits []string
	for _, d := range decodeDocs(t, renderKustomize(t, withMonitoring(t))) {
		kind := fmt.Sprintf("%v/%v", d["apiVersion"], d["kind"])
		name, _ := d["metadata"].(map[string]any)["name"].(string)
		newObj, ok := kubeTypes[kind]
		if !ok {
			t.Errorf("%s %s: not a kind these manifests should hold", kind, name)
			continue
		}
		kinds[kind]++
		js, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		obj := newObj()
		jd := json.NewDecoder(bytes.NewReader(js))
		jd.DisallowUnknownFields()
		if err := jd.Decode(obj); err != nil {
			t.Errorf("%s %s: not a valid %s: %v", kind, name, kind, err)
			continue
		}
		var sel map[string]string
		var tmpl *corev1.PodTemplateSpec
		switch o := obj.(type) {
		case *networkingv1.Ingress:
			// The API's routes from outside, with a class, a host and
			// TLS; never /metrics, /debug/pprof or the probes.
			if o.Spec.IngressClassName == nil || len(o.Spec.TLS) == 0 || len(o.Spec.Rules) == 0 || o.Spec.Rules[0].Host == "" {
				t.Errorf("%s %s: want an ingress class, a host and TLS", kind, name)
			}
			for _, r := range o.Spec.Rules {
				if r.HTTP == nil {
					continue
				}
				for _, p := range r.HTTP.Paths {
					for _, inside := range []string{"/metrics", "/debug/pprof/", "/healthz", "/readyz"} {
						if strings.HasPrefix(inside, p.Path) && (p.PathType == nil || *p.PathType != networkingv1.PathTypeExact || p.Path == inside) {
							t.Errorf("%s %s: path %s routes %s from outside", kind, name, p.Path, inside)
						}
					}
				}
			}
		case *podMonitor:
			// The Operator names a target's job by the pod label jobLabel
			// names (default: namespace/name): the alerts read job
			// "offerlog", as deploy/prometheus/prometheus.yml names it.
			if o.Spec.JobLabel == "" || o.Spec.Selector.MatchLabels[o.Spec.JobLabel] != "offerlog" {
				t.Errorf("%s %s: jobLabel %q: its targets' job is not the \"offerlog\" OfferlogDown reads", kind, name, o.Spec.JobLabel)
			}
		case *appsv1.Deployment:
			sel, tmpl = o.Spec.Selector.MatchLabels, &o.Spec.Template
		case *appsv1.StatefulSet:
			sel, tmpl = o.Spec.Selector.MatchLabels, &o.Spec.Template
			if o.Spec.ServiceName == "" {
				t.Errorf("%s %s: a StatefulSet needs its serviceName", kind, name)
			}
		case *batchv1.Job:
			tmpl = &o.Spec.Template
		}
		if tmpl == nil {
			continue
		}
		if sel != nil && !labels.SelectorFromSet(sel).Matches(labels.Set(tmpl.Labels)) {
			t.Errorf("%s %s: selector %v does not select its pods %v", kind, name, sel, tmpl.Labels)
		}
		for _, c := range append(slices.Clone(tmpl.Spec.InitContainers), tmpl.Spec.Containers...) {
			if c.Name == "" || c.Image == "" {
				t.Errorf("%s %s: a container without a name or an image", kind, name)
			}
		}
		for _, c := range tmpl.Spec.InitContainers {
			if strings.HasPrefix(c.Image, "offerlog") && len(c.Args) > 1 && c.Args[0] == "topics" && c.Args[1] == "wait" {
				waits = append(waits, name)
			}
		}
		for _, c := range tmpl.Spec.Containers {
			// Every component waits for the catalogue the topics Job
			// creates before it starts.
			if strings.HasPrefix(c.Image, "offerlog") && len(c.Args) > 0 && c.Args[0] == "run" && !slices.Contains(waits, name) {
				t.Errorf("%s %s: runs %s without waiting for the init Job (an init container offerlog topics wait)", kind, name, c.Args[1])
			}
		}
	}
	if kinds["batch/v1/Job"] == 0 || kinds["apps/v1/Deployment"] == 0 || kinds["apps/v1/StatefulSet"] < 3 {
		t.Errorf("rendered kinds %v: want the init Job, the components' Deployments and StatefulSets", kinds)
	}
}
