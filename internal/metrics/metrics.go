// Package metrics is a small Prometheus registry: counters, gauges and
// histograms with labels, and gauges computed at scrape time, written in the
// Prometheus text format on /metrics. All types are safe for concurrent use.
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds metric families. The zero value is not usable; use New.
type Registry struct {
	mu       sync.Mutex
	families []family
	names    map[string]bool
}

type family interface {
	name() string
	write(w io.Writer)
}

// New returns an empty registry.
func New() *Registry { return &Registry{names: map[string]bool{}} }

// add registers f, or returns the family already registered under its
// name: registering a name again shares the first family (a second call
// with other labels or another kind still gets the first).
func (r *Registry) add(f family) family {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[f.name()] {
		for _, old := range r.families {
			if old.name() == f.name() {
				return old
			}
		}
	}
	r.names[f.name()] = true
	r.families = append(r.families, f)
	return f
}

// Write writes every family in the Prometheus text format.
func (r *Registry) Write(w io.Writer) {
	r.mu.Lock()
	fs := append([]family(nil), r.families...)
	r.mu.Unlock()
	sort.Slice(fs, func(i, j int) bool { return fs[i].name() < fs[j].name() })
	for _, f := range fs {
		f.write(w)
	}
}

// Handler serves the registry on GET.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		r.Write(w)
	})
}

type vec[T any] struct {
	fam, help, kind string
	labels          []string
	mu              sync.RWMutex
	children        map[string]*T
	keys            map[string][]string
	mk              func() *T
}

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		vs := make([]string, len(v.labels))
		copy(vs, values)
		values = vs
	}
	k := strings.Join(values, "\x00")
	v.mu.RLock()
	c, ok := v.children[k]
	v.mu.RUnlock()
	if ok {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[k]; ok {
		return c
	}
	c = v.mk()
	v.children[k] = c
	v.keys[k] = append([]string(nil), values...)
	return c
}

func (v *vec[T]) each(fn func(labels string, c *T)) {
	v.mu.RLock()
	ks := make([]string, 0, len(v.children))
	for k := range v.children {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	type entry struct {
		l string
		c *T
	}
	es := make([]entry, len(ks))
	for i, k := range ks {
		es[i] = entry{labelString(v.labels, v.keys[k]), v.children[k]}
	}
	v.mu.RUnlock()
	for _, e := range es {
		fn(e.l, e.c)
	}
}

func (v *vec[T]) header(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.fam, v.help, v.fam, v.kind)
}

func labelString(names, values []string, extra ...string) string {
	var parts []string
	for i, n := range names {
		parts = append(parts, n+"="+strconv.Quote(values[i]))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		parts = append(parts, extra[i]+"="+strconv.Quote(extra[i+1]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Counter only goes up.
type Counter struct{ v atomic.Uint64 }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Value returns the current count.
func (c *Counter) Value() uint64 { return c.v.Load() }

// CounterVec is a family of counters told apart by label values.
type CounterVec struct{ v *vec[Counter] }

// Counter registers a counter family.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	v := &vec[Counter]{fam: name, help: help, kind: "counter", labels: labels,
		children: map[string]*Counter{}, keys: map[string][]string{}, mk: func() *Counter { return new(Counter) }}
	if old, ok := r.add(CounterVec{v}).(CounterVec); ok {
		return &old
	}
	return &CounterVec{v}
}

// With returns the counter of the given label values, in label order.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values) }

func (c CounterVec) name() string { return c.v.fam }
func (c CounterVec) write(w io.Writer) {
	c.v.header(w)
	c.v.each(func(l string, x *Counter) { fmt.Fprintf(w, "%s%s %d\n", c.v.fam, l, x.Value()) })
}

// Gauge goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the value.
func (g *Gauge) Set(x float64) { g.bits.Store(math.Float64bits(x)) }

// Add adds x (which may be negative).
func (g *Gauge) Add(x float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			return
		}
	}
}

// Value returns the value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// GaugeVec is a family of gauges told apart by label values.
type GaugeVec struct{ v *vec[Gauge] }

// Gauge registers a gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	v := &vec[Gauge]{fam: name, help: help, kind: "gauge", labels: labels,
		children: map[string]*Gauge{}, keys: map[string][]string{}, mk: func() *Gauge { return new(Gauge) }}
	if old, ok := r.add(GaugeVec{v}).(GaugeVec); ok {
		return &old
	}
	return &GaugeVec{v}
}

// With returns the gauge of the given label values.
func (g *GaugeVec) With(values ...string) *Gauge { return g.v.with(values) }

func (g GaugeVec) name() string { return g.v.fam }
func (g GaugeVec) write(w io.Writer) {
	g.v.header(w)
	g.v.each(func(l string, x *Gauge) { fmt.Fprintf(w, "%s%s %s\n", g.v.fam, l, formatFloat(x.Value())) })
}

// Histogram counts observations in cumulative buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64
	count  atomic.Uint64
	sum    Gauge
}

// Observe records x.
func (h *Histogram) Observe(x float64) {
	for i, b := range h.bounds {
		if x <= b {
			h.counts[i].Add(1)
		}
	}
	h.count.Add(1)
	h.sum.Add(x)
}

// HistogramVec is a family of histograms told apart by label values.
type HistogramVec struct{ v *vec[Histogram] }

// LatencyBuckets are bucket bounds in seconds from 1 ms to 10 s.
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Histogram registers a histogram family with the given bucket bounds.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	b := append([]float64(nil), buckets...)
	sort.Float64s(b)
	v := &vec[Histogram]{fam: name, help: help, kind: "histogram", labels: labels,
		children: map[string]*Histogram{}, keys: map[string][]string{},
		mk: func() *Histogram { return &Histogram{bounds: b, counts: make([]atomic.Uint64, len(b))} }}
	if old, ok := r.add(HistogramVec{v}).(HistogramVec); ok {
		return &old
	}
	return &HistogramVec{v}
}

// With returns the histogram of the given label values.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values) }

func (h HistogramVec) name() string { return h.v.fam }
func (h HistogramVec) write(w io.Writer) {
	h.v.header(w)
	h.v.each(func(l string, x *Histogram) {
		base := strings.TrimSuffix(strings.TrimPrefix(l, "{"), "}")
		sep := ""
		if base != "" {
			sep = ","
		}
		for i, b := range x.bounds {
			fmt.Fprintf(w, "%s_bucket{%s%sle=%q} %d\n", h.v.fam, base, sep, formatFloat(b), x.counts[i].Load())
		}
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", h.v.fam, base, sep, x.count.Load())
		fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", h.v.fam, l, formatFloat(x.sum.Value()), h.v.fam, l, x.count.Load())
	})
}

// Sample is one value of a computed gauge.
type Sample struct {
	Labels []string // values, in the family's label order
	Value  float64
}

type funcFamily struct {
	fam, help string
	labels    []string
	fn        func() []Sample
}

// GaugeFunc registers a gauge family computed by fn at every scrape. fn must
// be safe for concurrent use and should be quick.
func (r *Registry) GaugeFunc(name, help string, labels []string, fn func() []Sample) {
	r.add(&funcFamily{fam: name, help: help, labels: labels, fn: fn})
}

func (f *funcFamily) name() string { return f.fam }
func (f *funcFamily) write(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", f.fam, f.help, f.fam)
	for _, s := range f.fn() {
		fmt.Fprintf(w, "%s%s %s\n", f.fam, labelString(f.labels, s.Labels), formatFloat(s.Value))
	}
}

func formatFloat(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
