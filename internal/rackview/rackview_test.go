package rackview_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rackview"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/rackview -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./internal/rackview -update rewrites it; review the diff):\n%s", name, firstDiff(got, want))
	}
}

func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + a + "\nwant: " + b
		}
	}
	return ""
}

// wellFormed fails unless b is one well-formed XML document.
func wellFormed(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if x.Name.Local != "svg" || x.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("%s: root element %v, want svg in the SVG namespace", name, x.Name)
				}
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if roots != 1 || depth != 0 {
		t.Errorf("%s: %d root elements, depth %d at the end", name, roots, depth)
	}
}

func readSpec(t *testing.T, name string) *deploy.Rack {
	t.Helper()
	r, err := deploy.ReadRack(filepath.Join("..", "..", "testdata", "racks", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	return r
}

type render struct {
	ext string
	fn  func(io.Writer, *rackview.Model) error
}

var renders = []render{
	{"front.svg", rackview.FrontSVG},
	{"logical.svg", rackview.LogicalSVG},
	{"flows.svg", rackview.FlowsSVG},
	{"mmd", rackview.Mermaid},
	{"dot", rackview.Dot},
	{"txt", func(w io.Writer, m *rackview.Model) error { return rackview.Text(w, m, false) }},
	{"json", func(w io.Writer, m *rackview.Model) error {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(m)
	}},
}

// goldenSpecs are the specs whose drawings are kept as golden files: one
// rack with GPUs, two InfiniBand racks, two RoCEv2 racks with GPUs.
var goldenSpecs = map[string]bool{"two-hicain-gpu": true, "two-ib": true, "two-racks-gpu": true}

// TestSpecs draws every example rack spec in every format: deterministic
// (twice the same bytes), well-formed SVG, and as the golden files.
func TestSpecs(t *testing.T) {
	for _, spec := range []string{"two-rxe", "two-hicain", "two-hicain-gpu", "two-ib", "mixed", "two-racks-gpu"} {
		r := readSpec(t, spec)
		// ORv3 geometry: the units fill the rack top to bottom, TOR first.
		for _, rk := range rackview.FromSpec(r).Racks {
			top := 0
			for _, u := range rk.Units {
				if u.Top != top {
					t.Errorf("%s %s: %s at OU %d, want %d", spec, rk.Name, u.Kind, u.Top, top)
				}
				top += u.Height
			}
			if top != rackview.RackOU || rk.Units[0].Kind != rackview.KindTOR {
				t.Errorf("%s %s: %d OU, first unit %s", spec, rk.Name, top, rk.Units[0].Kind)
			}
		}
		for _, rd := range renders {
			t.Run(spec+"."+rd.ext, func(t *testing.T) {
				var a, b bytes.Buffer
				if err := rd.fn(&a, rackview.FromSpec(r)); err != nil {
					t.Fatal(err)
				}
				if err := rd.fn(&b, rackview.FromSpec(r)); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Fatal("two renderings differ")
				}
				if strings.HasSuffix(rd.ext, "svg") {
					wellFormed(t, spec+"."+rd.ext, a.Bytes())
				}
				if goldenSpecs[spec] {
					golden(t, spec+"."+rd.ext+".golden", a.Bytes())
				}
			})
		}
	}
}

// runningStatus is a two-guest rack as deploy.Status reads it: the
// fabric runs with port 1 up and counting, vm-a runs, vm-b crashed.
func runningStatus(t *testing.T) (*deploy.Rack, *deploy.RackStatus) {
	r := readSpec(t, "two-hicain-gpu")
	rs := &deploy.RackStatus{Name: r.Name, RunDir: r.RunDir, Fabric: "running", Device: "running", GPU: "running",
		VNICs: []device.VNICStatus{{Name: "vm-a", State: "live"}, {Name: "vm-b", State: "waiting"}},
		GPUs: []deploy.GPUInfo{{Guest: "vm-a", ID: 0, MemoryMiB: 256, State: "live"}, {Guest: "vm-a", ID: 1, MemoryMiB: 256, State: "ready"},
			{Guest: "vm-b", ID: 0, MemoryMiB: 256, State: "waiting"}, {Guest: "vm-b", ID: 1, MemoryMiB: 256, State: "waiting"}},
		Guests: []deploy.GuestStatus{
			{Name: "vm-a", State: "running", SSH: "127.0.0.1:2262", DataIP: "10.46.0.1", NIC: "hicain", RDMADev: "hicain0", Link: "eth", PortState: "ACTIVE"},
			{Name: "vm-b", State: "crashed", SSH: "127.0.0.1:2263", DataIP: "10.46.0.2", NIC: "hicain", Link: "eth", Error: "qemu: killed"},
		},
		Switches: &fabric.Status{Switches: []fabric.SwitchStatus{{Name: "sw0", Ports: []fabric.PortStatus{
			{Num: 1, Kind: "seqpacket", State: "up", RxFrames: 10, TxFrames: 12, RxBytes: 1000, TxBytes: 1200},
			{Num: 2, Kind: "seqpacket", State: "down"},
		}}}},
	}
	return r, rs
}

// TestStatus draws a running rack: LEDs follow the processes, the ports
// and the GPUs.
func TestStatus(t *testing.T) {
	r, rs := runningStatus(t)
	m := rackview.FromStatus(r, rs)
	u := m.Racks[0].Units
	if u[0].Kind != rackview.KindTOR || u[0].LED != rackview.Active || u[0].Ports[0].LED != rackview.Active ||
		u[0].Ports[1].LED != rackview.Idle || u[0].Ports[2].LED != rackview.Off || u[0].Ports[0].TxBytes != 1200 {
		t.Errorf("TOR %+v", u[0])
	}
	if u[1].Kind != rackview.KindHiLink || u[1].LED != rackview.Active || u[1].Ports[0].LED != rackview.Active || u[1].Ports[1].LED != rackview.Idle {
		t.Errorf("HiLink %+v", u[1])
	}
	if u[3].Name != "vm-a" || u[3].LED != rackview.Active || u[3].Ports[0].LED != rackview.Active {
		t.Errorf("vm-a %+v", u[3])
	}
	if u[4].Name != "vm-b" || u[4].LED != rackview.Fault || u[4].Ports[0].LED != rackview.Fault {
		t.Errorf("vm-b %+v", u[4])
	}
	for _, rd := range renders {
		var b bytes.Buffer
		if err := rd.fn(&b, m); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(rd.ext, "svg") {
			wellFormed(t, "status."+rd.ext, b.Bytes())
		}
		golden(t, "status."+rd.ext+".golden", b.Bytes())
	}
}

// TestOverflow: a switch with more guests than blade slots draws eight
// and says how many more there are.
func TestOverflow(t *testing.T) {
	r := &deploy.Rack{Name: "big"}
	for i := 0; i < 10; i++ {
		r.Guests = append(r.Guests, deploy.Guest{})
	}
	r.Switches = []deploy.Switch{{Name: "sw0", Ports: 16}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	m := rackview.FromSpec(r)
	if m.Racks[0].Overflow != 2 {
		t.Errorf("overflow %d, want 2", m.Racks[0].Overflow)
	}
	var b bytes.Buffer
	if err := rackview.Text(&b, m, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "2 more guest(s) on sw0") {
		t.Errorf("no overflow note:\n%s", b.String())
	}
	var s bytes.Buffer
	if err := rackview.FrontSVG(&s, m); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, "big.svg", s.Bytes())
}

// TestColor: with colour the terminal view carries ANSI styles; without,
// none.
func TestColor(t *testing.T) {
	m := rackview.FromSpec(readSpec(t, "two-ib"))
	var plain, col bytes.Buffer
	_ = rackview.Text(&plain, m, false)
	_ = rackview.Text(&col, m, true)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("plain output has escape sequences")
	}
	if !strings.Contains(col.String(), "\x1b[") {
		t.Error("coloured output has no escape sequences")
	}
}
