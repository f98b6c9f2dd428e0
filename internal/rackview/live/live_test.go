package live_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rackview"
	"github.com/PacketFive/hinic/internal/rackview/live"
)

// fakeSource is a rack whose port sw0:1 and vm-a's vNIC count up by
// step frames at every sample. Safe for concurrent use.
type fakeSource struct {
	mu    sync.Mutex
	n     uint64
	step  uint64
	calls int
}

func (f *fakeSource) Sample(context.Context) (live.Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.n += f.step
	n := f.n
	return live.Sample{
		Ports: []live.PortSample{
			{Switch: "sw0", Port: 2, Up: false},
			{Switch: "sw0", Port: 1, Up: true, RxFrames: n, TxFrames: 2 * n, RxBytes: 1000 * n, TxBytes: 2000 * n},
		},
		Guests: []live.GuestSample{{Name: "vm-a", State: "live", LinkUp: true, Doorbells: n, RoCERx: n,
			QPs: []live.QP{{QPN: 17, State: "RTS", SQ: uint32(n), RQ: 3}}}},
	}, nil
}

func spec(t testing.TB, name string) *deploy.Rack {
	t.Helper()
	r, err := deploy.ReadRack(filepath.Join("..", "..", "..", "testdata", "racks", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewEvent(t *testing.T) {
	prev := &live.Sample{Ports: []live.PortSample{{Switch: "sw0", Port: 1, RxFrames: 10, TxFrames: 5, RxBytes: 1000, TxBytes: 500}}}
	cur := &live.Sample{Ports: []live.PortSample{
		{Switch: "sw1", Port: 1},
		{Switch: "sw0", Port: 1, Up: true, RxFrames: 30, TxFrames: 5, RxBytes: 3000, TxBytes: 500},
	}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := live.NewEvent(prev, cur, 2*time.Second, at)
	if ev.Time != "2026-01-02T03:04:05Z" || len(ev.Ports) != 2 || ev.Ports[0].ID != "sw0-1" || ev.Ports[1].ID != "sw1-1" {
		t.Fatalf("event %+v", ev)
	}
	p := ev.Ports[0]
	if p.RxFps != 10 || p.RxBps != 8000 || p.TxFps != 0 || p.TxBps != 0 || !p.Moved {
		t.Errorf("rates %+v", p)
	}
	if ev.Ports[1].Moved || ev.Ports[1].RxBps != 0 {
		t.Errorf("a new port has rates: %+v", ev.Ports[1])
	}
	// A restarted switch's counters go down: no rate, not negative.
	ev = live.NewEvent(cur, prev, time.Second, at)
	if ev.Ports[0].RxBps != 0 || ev.Ports[0].RxFps != 0 {
		t.Errorf("after a reset %+v", ev.Ports[0])
	}
	if ev.Guests == nil {
		t.Error("guests is null, not []")
	}
}

// readEvents reads n events of the stream at url.
func readEvents(t *testing.T, url string, n int) []live.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var out []live.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() && len(out) < n {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			if event != "sample" {
				t.Fatalf("event %q", event)
			}
			var ev live.Event
			if err := json.Unmarshal([]byte(v), &ev); err != nil {
				t.Fatalf("%v: %s", err, v)
			}
			out = append(out, ev)
		}
	}
	if len(out) < n {
		t.Fatalf("%d events, want %d: %v", len(out), n, sc.Err())
	}
	return out
}

func TestServer(t *testing.T) {
	src := &fakeSource{step: 5}
	srv := &live.Server{Model: rackview.FromSpec(spec(t, "two-hicain")), Source: src, Interval: 20 * time.Millisecond}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	// Drawn from the spec, vm-a is idle until the events say otherwise.
	for _, want := range []string{`<svg xmlns="http://www.w3.org/2000/svg"`, `id="port-sw0-1"`, `id="led-vm-a" class="led idle"`, `data-b="sw0-1"`,
		`new EventSource("events")`, "prefers-reduced-motion", `id="guests"`, `id="qps"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// Self-contained: nothing to fetch from elsewhere.
	for _, bad := range []string{"<link", " src=", "@import", "url(", "https://"} {
		if strings.Contains(string(page), bad) {
			t.Errorf("page refers to something outside it: %q", bad)
		}
	}

	evs := readEvents(t, ts.URL+"/events", 3)
	if evs[0].Ports[0].Moved {
		t.Error("the first event has rates")
	}
	p := evs[2].Ports[0]
	if p.ID != "sw0-1" || !p.Up || !p.Moved || p.RxFps <= 0 || p.TxBps <= 0 {
		t.Errorf("port %+v", p)
	}
	if g := evs[2].Guests; len(g) != 1 || g[0].Name != "vm-a" || len(g[0].QPs) != 1 || g[0].QPs[0].QPN != 17 {
		t.Errorf("guests %+v", g)
	}

	resp, err = http.Get(ts.URL + "/model.json")
	if err != nil {
		t.Fatal(err)
	}
	var m rackview.Model
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || m.Name != "hicain" || len(m.Racks) != 1 {
		t.Errorf("model %v %+v", err, m)
	}
}

// errSource fails every sample.
type errSource struct{}

func (errSource) Sample(context.Context) (live.Sample, error) {
	return live.Sample{}, os.ErrNotExist
}

func TestServerSourceError(t *testing.T) {
	srv := &live.Server{Model: rackview.FromSpec(spec(t, "two-hicain")), Source: errSource{}, Interval: 10 * time.Millisecond}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	if ev := readEvents(t, ts.URL+"/events", 1)[0]; ev.Error == "" {
		t.Errorf("event %+v, want an error", ev)
	}
}

// TestRunDirFabric reads a real fabric of this process through its
// control socket, as the live page of a deployed rack does: port 1
// comes up and counts the frames a peer sends.
func TestRunDirFabric(t *testing.T) {
	r, _ := startFabric(t, 2)
	src := live.RunDir{Rack: r}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s0, err := src.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s0.Ports) != 2 || s0.Ports[0].Up || s0.Guests != nil {
		t.Fatalf("sample %+v", s0)
	}
	mac := [6]byte{0x52, 0x54, 0, 0x43, 0, 1}
	c, _, err := fabric.DialPort(ctx, deploy.PortSocket(r, "sw0", 1), &proto.HelloFields{Version: proto.HelloVersion,
		LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC, MaxFrame: 1514, MAC: mac, PortNum: 1, Name: "vm-a/hicain0"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := make([]byte, 60)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(frame[6:], mac[:])
	frame[12], frame[13] = 0x88, 0xb5 // a local experimental EtherType
	var s1 live.Sample
	for i := 0; ; i++ {
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if s1, err = src.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		if s1.Ports[0].Up && s1.Ports[0].RxFrames > 0 {
			break
		}
		if i == 100 {
			t.Fatalf("port 1 never counted a frame: %+v", s1.Ports[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	ev := live.NewEvent(&s0, &s1, time.Second, time.Now())
	if !ev.Ports[0].Moved || ev.Ports[0].RxBps <= 0 || ev.Ports[0].ID != "sw0-1" {
		t.Errorf("event port %+v", ev.Ports[0])
	}
}

// FuzzNewEvent: any two samples, in any order, give rates that are
// finite and not negative, and ports sorted by switch and number.
func FuzzNewEvent(f *testing.F) {
	f.Add("sw0", 1, uint64(10), uint64(5), uint64(30), uint64(2), int64(time.Second))
	f.Add("", 0, uint64(1<<63), uint64(0), uint64(0), uint64(1<<64-1), int64(0))
	f.Fuzz(func(t *testing.T, sw string, port int, a, b, c, d uint64, dt int64) {
		prev := &live.Sample{Ports: []live.PortSample{{Switch: sw, Port: port, RxFrames: a, TxFrames: b, RxBytes: a, TxBytes: b}}}
		cur := &live.Sample{Ports: []live.PortSample{{Switch: sw, Port: port, RxFrames: c, TxFrames: d, RxBytes: c, TxBytes: d},
			{Switch: sw + "x", Port: port - 1}}}
		ev := live.NewEvent(prev, cur, time.Duration(dt), time.Unix(0, 0))
		for _, p := range ev.Ports {
			for _, r := range []float64{p.RxBps, p.TxBps, p.RxFps, p.TxFps} {
				if r < 0 || r != r || r > 1e300 {
					t.Fatalf("rate %v of %+v", r, p)
				}
			}
		}
		if len(ev.Ports) == 2 && ev.Ports[0].Switch > ev.Ports[1].Switch {
			t.Fatalf("unsorted %+v", ev.Ports)
		}
	})
}

// startFabric starts a fabric of this process, one switch sw0 with
// ports ports, in the run directory of two-hicain.yaml's rack, made a
// temporary directory (short, for the socket paths); the test closes it.
func startFabric(t *testing.T, ports int) (*deploy.Rack, *fabric.Fabric) {
	t.Helper()
	dir, err := os.MkdirTemp("", "hinic-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := spec(t, "two-hicain")
	r.RunDir = dir
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(dir, deploy.DirFabric), Switches: []fabric.SwitchConfig{{Name: "sw0", Ports: ports}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	return r, fab
}
