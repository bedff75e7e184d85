// Package metrics is offerlog's face of prometheus/client_golang: counters,
// gauges and histograms with labels, gauges computed at scrape time, the Go
// runtime and process collectors, served on /metrics in the Prometheus text
// format or OpenMetrics (as the scraper asks). All types are safe for
// concurrent use.
//
// It keeps the small API the components were written against (a family is
// registered by name once; a second registration of the name shares the
// first; With pads missing label values) over the ecosystem's standard
// registry and exposition, which replaced a hand-written one.
package metrics

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Registry holds metric families. The zero value is not usable; use New.
type Registry struct {
	reg      *prometheus.Registry
	mu       sync.Mutex
	families map[string]any // name -> *CounterVec, *GaugeVec, *HistogramVec or *funcCollector
}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: reg, families: map[string]any{}}
}

// family returns the family registered under name, or registers the one mk
// makes; a family of another kind under the name is a programming error.
func family[T any](r *Registry, name string, mk func() (T, prometheus.Collector)) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.families[name]; ok {
		if t, ok := f.(T); ok {
			return t
		}
		panic("metrics: " + name + " registered twice with different kinds")
	}
	t, c := mk()
	r.reg.MustRegister(c)
	r.families[name] = t
	return t
}

// Write writes every family in the Prometheus text format.
func (r *Registry) Write(w io.Writer) {
	mfs, _ := r.reg.Gather() // what could be gathered, as the handler serves it
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
}

// Handler serves the registry on GET, in OpenMetrics when the scraper asks
// for it; a family that fails to gather is left out, never the whole page.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError})
}

// children caches the children of a vector by label values, padding or
// cutting the values to the family's labels.
type children[T any] struct {
	labels int
	mu     sync.RWMutex
	m      map[string]*T
	mk     func(values []string) *T
}

func (c *children[T]) with(values []string) *T {
	if len(values) != c.labels {
		vs := make([]string, c.labels)
		copy(vs, values)
		values = vs
	}
	for i, v := range values { // client_golang panics on invalid UTF-8
		if !utf8.ValidString(v) {
			values = slices.Clone(values)
			values[i] = strings.ToValidUTF8(v, "\ufffd")
		}
	}
	k := strings.Join(values, "\x00")
	c.mu.RLock()
	x, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return x
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if x, ok := c.m[k]; ok {
		return x
	}
	x = c.mk(values)
	c.m[k] = x
	return x
}

func read(m prometheus.Metric) *dto.Metric {
	var out dto.Metric
	_ = m.Write(&out)
	return &out
}

// Counter only goes up.
type Counter struct{ c prometheus.Counter }

// Add adds n.
func (c *Counter) Add(n uint64) { c.c.Add(float64(n)) }

// Inc adds one.
func (c *Counter) Inc() { c.c.Inc() }

// Value returns the current count.
func (c *Counter) Value() uint64 { return uint64(read(c.c).GetCounter().GetValue()) }

// CounterVec is a family of counters told apart by label values.
type CounterVec struct{ ch *children[Counter] }

// Counter registers a counter family.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	return family(r, name, func() (*CounterVec, prometheus.Collector) {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		return &CounterVec{ch: &children[Counter]{labels: len(labels), m: map[string]*Counter{},
			mk: func(vs []string) *Counter { return &Counter{c: v.WithLabelValues(vs...)} }}}, v
	})
}

// With returns the counter of the given label values, in label order.
func (c *CounterVec) With(values ...string) *Counter { return c.ch.with(values) }

// Gauge goes up and down.
type Gauge struct{ g prometheus.Gauge }

// Set sets the value.
func (g *Gauge) Set(x float64) { g.g.Set(x) }

// Add adds x (which may be negative).
func (g *Gauge) Add(x float64) { g.g.Add(x) }

// Value returns the value.
func (g *Gauge) Value() float64 { return read(g.g).GetGauge().GetValue() }

// GaugeVec is a family of gauges told apart by label values.
type GaugeVec struct{ ch *children[Gauge] }

// Gauge registers a gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	return family(r, name, func() (*GaugeVec, prometheus.Collector) {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		return &GaugeVec{ch: &children[Gauge]{labels: len(labels), m: map[string]*Gauge{},
			mk: func(vs []string) *Gauge { return &Gauge{g: v.WithLabelValues(vs...)} }}}, v
	})
}

// With returns the gauge of the given label values.
func (g *GaugeVec) With(values ...string) *Gauge { return g.ch.with(values) }

// Histogram counts observations in cumulative buckets.
type Histogram struct{ o prometheus.Observer }

// Observe records x.
func (h *Histogram) Observe(x float64) { h.o.Observe(x) }

// HistogramVec is a family of histograms told apart by label values.
type HistogramVec struct{ ch *children[Histogram] }

// LatencyBuckets are bucket bounds in seconds from 1 ms to 10 s.
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// WriteHops registers (or returns) the histogram of the hops of the write
// paths: how long each step of a write took, by path (document, offer) and
// hop (append: the produce acknowledged; verdict or answer: the processor's
// reply matched; view: the API's view showing the write).
func (r *Registry) WriteHops() *HistogramVec {
	return r.Histogram("offerlog_write_hop_seconds", "Time of each hop of a write, by path and hop.", LatencyBuckets, "path", "hop")
}

// Histogram registers a histogram family with the given bucket bounds.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	return family(r, name, func() (*HistogramVec, prometheus.Collector) {
		b := slices.Clone(buckets)
		slices.Sort(b)
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b}, labels)
		return &HistogramVec{ch: &children[Histogram]{labels: len(labels), m: map[string]*Histogram{},
			mk: func(vs []string) *Histogram { return &Histogram{o: v.WithLabelValues(vs...)} }}}, v
	})
}

// With returns the histogram of the given label values.
func (h *HistogramVec) With(values ...string) *Histogram { return h.ch.with(values) }

// Sample is one value of a computed gauge.
type Sample struct {
	Labels []string // values, in the family's label order
	Value  float64
}

// funcCollector is a gauge family computed by fn at every scrape.
type funcCollector struct {
	desc   *prometheus.Desc
	labels int
	fn     func() []Sample
}

func (f *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

// Collect emits fn's samples, one per label set (the last wins), so that a
// function that lists one series twice cannot break the scrape.
func (f *funcCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	samples := f.fn()
	for i := len(samples) - 1; i >= 0; i-- {
		s := samples[i]
		vs := make([]string, f.labels)
		copy(vs, s.Labels)
		k := strings.Join(vs, "\x00")
		if seen[k] {
			continue
		}
		seen[k] = true
		if m, err := prometheus.NewConstMetric(f.desc, prometheus.GaugeValue, s.Value, vs...); err == nil {
			ch <- m
		}
	}
}

// GaugeFunc registers a gauge family computed by fn at every scrape. fn must
// be safe for concurrent use (scrapes may overlap) and quick: serve figures
// computed beforehand rather than asking the broker.
func (r *Registry) GaugeFunc(name, help string, labels []string, fn func() []Sample) {
	family(r, name, func() (*funcCollector, prometheus.Collector) {
		f := &funcCollector{desc: prometheus.NewDesc(name, help, labels, nil), labels: len(labels), fn: fn}
		return f, f
	})
}
