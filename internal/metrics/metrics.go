// Package metrics exports the counters of HiNIC's servers (HiSwitch, the
// device backend, the GPU backend, the HiLink switch) to Prometheus.
//
// The collectors read a server's Status at scrape time: nothing is
// counted on the data path beyond the atomic counters the servers keep
// anyway. Every metric is defined once, in the tables of this package
// (Defs); the collectors, docs/metrics.md and the Grafana dashboard's
// test all follow them.
//
// It imports the servers' packages and is imported only by the command
// line; the servers never import it.
package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is a metric's Prometheus type.
type Kind int

// The kinds the endpoint exports.
const (
	Counter Kind = iota
	Gauge
)

func (k Kind) String() string {
	if k == Gauge {
		return "gauge"
	}
	return "counter"
}

// Def defines one metric: its name, type, help and label names.
type Def struct {
	Name   string
	Kind   Kind
	Help   string
	Labels []string
	// Source is the server that exports it: fabric, device, gpu or link.
	Source string
	desc   *prometheus.Desc
}

func (d *Def) valueType() prometheus.ValueType {
	if d.Kind == Gauge {
		return prometheus.GaugeValue
	}
	return prometheus.CounterValue
}

var defs []*Def

// def adds a metric to the table.
func def(source, name string, kind Kind, help string, labels ...string) *Def {
	d := &Def{Name: name, Kind: kind, Help: help, Labels: labels, Source: source,
		desc: prometheus.NewDesc(name, help, labels, nil)}
	defs = append(defs, d)
	return d
}

// Defs returns every metric the endpoints export, sorted by name.
func Defs() []Def {
	out := make([]Def, 0, len(defs))
	for _, d := range defs {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// emitFunc hands one sample of d to the scrape.
type emitFunc func(d *Def, v float64, labelValues ...string)

// collector is a prometheus.Collector over a server's status: every
// scrape calls status once and turns it into samples.
type collector[S any] struct {
	source string
	status func() S
	emit   func(S, emitFunc)
}

func (c *collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range defs {
		if d.Source == c.source {
			ch <- d.desc
		}
	}
}

func (c *collector[S]) Collect(ch chan<- prometheus.Metric) {
	c.emit(c.status(), func(d *Def, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d.desc, d.valueType(), v, lv...)
	})
}

func u(v uint64) float64 { return float64(v) }

func b(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
