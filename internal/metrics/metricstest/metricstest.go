// Package metricstest scrapes a /metrics endpoint in tests and reads the
// samples through the Prometheus library's text parser.
package metricstest

import (
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url, asking for the text format, and parses the answer.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: parse: %v", url, err)
	}
	return fams
}

// Value returns the value of the sample of family name whose labels
// include the name/value pairs kv, and whether there is one. A counter's,
// gauge's or untyped sample's value is returned.
func (f Families) Value(name string, kv ...string) (float64, bool) {
	mf := f[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(kv); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == kv[i] && lp.GetValue() == kv[i+1] {
					found = true
					break
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// Type returns the type of family name ("" if absent).
func (f Families) Type(name string) string {
	if mf := f[name]; mf != nil {
		return mf.GetType().String()
	}
	return ""
}

// Serve runs a serve command's Run in the background, with ready wired
// to the Options' MetricsReady, and returns the endpoint's URL once it
// listens. The run is cancelled, and must return nil, when the test
// ends.
func Serve(t testing.TB, run func(ctx context.Context, ready func(url string)) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(u string) { urlc <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case u := <-urlc:
		return u
	case err := <-done:
		done <- err
		t.Fatalf("serve returned before the metrics endpoint started: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the metrics endpoint did not start")
	}
	return ""
}
