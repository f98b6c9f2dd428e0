// Package live serves the live page of `hinic deploy graph --serve`: the
// rack's front view (rackview), with per-port rates, LEDs and packets
// moving along the cables as the counters move, and per-guest QP and
// traffic tables, pushed to the page by Server-Sent Events. The page is
// self-contained (HTML, CSS and script embedded, nothing fetched from
// the network) and honours prefers-reduced-motion.
//
// The counters come from a Source: RunDir reads a deployed rack's
// fabric and device backend through their control sockets; tests inject
// their own. live imports rackview, deploy, fabric and device; it must
// not import the CLI.
package live

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/rackview"
)

// Sample is one reading of a rack's counters.
type Sample struct {
	Ports  []PortSample  `json:"ports"`
	Guests []GuestSample `json:"guests"`
}

// PortSample is one switch port's state and counters since its switch
// started.
type PortSample struct {
	Switch   string `json:"switch"`
	Port     int    `json:"port"`
	Up       bool   `json:"up"`
	RxFrames uint64 `json:"rx_frames"`
	TxFrames uint64 `json:"tx_frames"`
	RxBytes  uint64 `json:"rx_bytes"`
	TxBytes  uint64 `json:"tx_bytes"`
}

// GuestSample is one guest's vNIC as its device backend sees it.
type GuestSample struct {
	Name       string `json:"name"`
	State      string `json:"state"` // the vNIC's: waiting, ready, live, fatal
	LinkUp     bool   `json:"link_up"`
	QPs        []QP   `json:"qps"`
	Doorbells  uint64 `json:"doorbells"`
	Interrupts uint64 `json:"interrupts"`
	L2Tx       uint64 `json:"l2_tx"`
	L2Rx       uint64 `json:"l2_rx"`
	RoCERx     uint64 `json:"roce_rx"`
}

// QP is one guest QP.
type QP struct {
	QPN   uint32 `json:"qpn"`
	State string `json:"state"`
	SQ    uint32 `json:"sq_taken"`
	RQ    uint32 `json:"rq_taken"`
}

// Source reads a rack's counters. Sample is called from one goroutine
// per connected page.
type Source interface {
	Sample(ctx context.Context) (Sample, error)
}

// Event is what the page receives for each sample.
type Event struct {
	Time   string        `json:"time"`
	Ports  []PortRate    `json:"ports"`
	Guests []GuestSample `json:"guests"`
	Error  string        `json:"error,omitempty"`
}

// PortRate is a port's counters and its rates since the last sample.
type PortRate struct {
	PortSample
	ID       string  `json:"id"`        // rackview.SwitchPortID
	SwitchID string  `json:"switch_id"` // rackview.ElementID of the switch
	RxBps    float64 `json:"rx_bps"`
	TxBps    float64 `json:"tx_bps"`
	RxFps    float64 `json:"rx_fps"`
	TxFps    float64 `json:"tx_fps"`
	// Moved is true when a counter changed since the last sample: the
	// page sends a packet along the port's cable.
	Moved bool `json:"moved"`
}

// DefaultInterval is how often a page's counters are read.
const DefaultInterval = time.Second

// Server serves the page and its events. Set the fields before the
// first request; it is then safe for concurrent use.
type Server struct {
	Model    *rackview.Model
	Source   Source
	Interval time.Duration // DefaultInterval when 0
	// Now stamps the events; time.Now when nil.
	Now func() time.Time
}

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// Handler returns the server's routes: / (the page), /events (the
// event stream), /model.json (the drawing model).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /model.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = rackview.JSON(w, s.Model, "front")
	})
	return mux
}

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	var svg bytes.Buffer
	if err := rackview.FrontSVG(&svg, s.Model); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	err := pageTmpl.Execute(&b, struct {
		Name     string
		SVG      template.HTML
		Interval int64
	}{s.Model.Name, template.HTML(svg.String()), s.interval().Milliseconds()})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// Nothing on the page comes from elsewhere, and nothing may.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// events streams one Event per interval until the page goes away.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ctx := r.Context()
	t := time.NewTicker(s.interval())
	defer t.Stop()
	var prev *Sample
	var prevAt time.Time
	for {
		at := s.now()
		smp, err := s.Source.Sample(ctx)
		var ev Event
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			ev = Event{Time: at.UTC().Format(time.RFC3339), Error: err.Error()}
		} else {
			ev = NewEvent(prev, &smp, at.Sub(prevAt), at)
			prev, prevAt = &smp, at
		}
		b, _ := json.Marshal(&ev)
		if _, err := fmt.Fprintf(w, "event: sample\ndata: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NewEvent turns a sample into an event, with rates against prev (nil
// for the first sample) taken dt earlier. Ports are sorted by switch
// and number.
func NewEvent(prev, cur *Sample, dt time.Duration, at time.Time) Event {
	ev := Event{Time: at.UTC().Format(time.RFC3339), Guests: cur.Guests}
	type key struct {
		sw string
		n  int
	}
	old := map[key]PortSample{}
	if prev != nil {
		for _, p := range prev.Ports {
			old[key{p.Switch, p.Port}] = p
		}
	}
	sec := dt.Seconds()
	for _, p := range cur.Ports {
		pr := PortRate{PortSample: p, ID: rackview.SwitchPortID(p.Switch, p.Port), SwitchID: rackview.ElementID(p.Switch)}
		if o, ok := old[key{p.Switch, p.Port}]; ok && sec > 0 {
			// A counter that went down is a restarted switch: no rate.
			rate := func(a, b uint64) float64 {
				if b < a {
					return 0
				}
				return float64(b-a) / sec
			}
			pr.RxBps, pr.TxBps = 8*rate(o.RxBytes, p.RxBytes), 8*rate(o.TxBytes, p.TxBytes)
			pr.RxFps, pr.TxFps = rate(o.RxFrames, p.RxFrames), rate(o.TxFrames, p.TxFrames)
			pr.Moved = p.RxFrames != o.RxFrames || p.TxFrames != o.TxFrames
		}
		ev.Ports = append(ev.Ports, pr)
	}
	sort.Slice(ev.Ports, func(i, j int) bool {
		a, b := ev.Ports[i], ev.Ports[j]
		if a.Switch != b.Switch {
			return a.Switch < b.Switch
		}
		return a.Port < b.Port
	})
	if ev.Guests == nil {
		ev.Guests = []GuestSample{}
	}
	return ev
}

// Serve serves the page on addr until ctx ends; ready, when not nil, is
// called with the address listened on (addr may have port 0).
func (s *Server) Serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("deploy graph: listen %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if ready != nil {
		ready(ln.Addr())
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-done
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// guestOfVNIC is the guest of a vNIC name "vm-a/hicain0".
func guestOfVNIC(name string) string {
	g, _, _ := strings.Cut(name, "/")
	return g
}
