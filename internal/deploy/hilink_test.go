package deploy

import (
	"slices"
	"strings"
	"testing"
)

// TestHiLinkDefaults: a rack with GPUs gets its HiLink switch without a
// line in the spec, GPUs take the next free ports in spec order, a
// guest may opt out, and a rack without GPUs runs none.
func TestHiLinkDefaults(t *testing.T) {
	r := &Rack{RunDir: "/tmp/hr", Guests: []Guest{
		{Name: "a", GPUs: GPUs{Count: 2}},
		{Name: "b", GPUs: GPUs{Count: 1, IDs: []int{5}, HiLinkPorts: []int{0}}},
		{Name: "c", GPUs: GPUs{Count: 1, IDs: []int{0}, HiLink: HiLinkNone}},
		{Name: "d"},
	}}
	// b takes port 0 by name: a, before it in the spec, goes round it.
	r.Guests[0].GPUs.HiLinkPorts = nil
	r.Guests[1].GPUs.HiLinkPorts = []int{2}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if hl := r.Switches[0].HiLink; hl.Name != "hl-sw0" || hl.Ports != 8 {
		t.Errorf("HiLink switch %+v", hl)
	}
	a, b, c := r.Guests[0].GPUs, r.Guests[1].GPUs, r.Guests[2].GPUs
	if a.HiLink != "hl-sw0" || !slices.Equal(a.HiLinkPorts, []int{0, 1}) || !slices.Equal(b.HiLinkPorts, []int{2}) {
		t.Errorf("a %+v, b %+v", a, b)
	}
	if c.HiLink != HiLinkNone || c.HiLinkPorts != nil || HiLinkPort(r, r.Guests[2], 0) != "" {
		t.Errorf("c %+v", c)
	}
	if got := HiLinkPort(r, r.Guests[1], 5); got != "/tmp/hr/hilink/hl-sw0/hilink-port2.sock" {
		t.Errorf("b's port %s", got)
	}
	if sw := HiLinkSwitches(r); len(sw) != 1 || sw[0].Name != "sw0" {
		t.Errorf("HiLink switches %+v", sw)
	}
	got := strings.Join(LinkArgs(r, r.Switches[0]), " ")
	if want := "link serve --run-dir /tmp/hr/hilink/hl-sw0 --ports 8"; got != want {
		t.Errorf("link serve %s, want %s", got, want)
	}
	if !hasRun(append([]string{"hinic"}, LinkArgs(r, r.Switches[0])...), hilinkProc(r, "hl-sw0", "").args) {
		t.Error("the HiLink switch's command line is not its proc's")
	}
	r.Pcap = true
	if got := strings.Join(LinkArgs(r, r.Switches[0]), " "); !strings.HasSuffix(got, " --pcap /tmp/hr/pcap/hilink-hl-sw0") {
		t.Errorf("with pcap: %s", got)
	}

	none := &Rack{Guests: []Guest{{Name: "a"}, {Name: "b", GPUs: GPUs{Count: 1, HiLink: HiLinkNone}}}}
	if err := none.Defaults(); err != nil {
		t.Fatal(err)
	}
	if sw := HiLinkSwitches(none); len(sw) != 0 {
		t.Errorf("a rack without HiLink GPUs runs %+v", sw)
	}
	if args := strings.Join(GPUArgs(none), " "); strings.Contains(args, "hilink=") {
		t.Errorf("a GPU without HiLink got a port: %s", args)
	}
}

// TestTwoRacksHiLinkLocal: the two-rack spec gives each rack its own
// HiLink switch with only its own GPUs; no cable joins them, and the
// only link between the racks is the TORs' Ethernet (RoCEv2) cable.
func TestTwoRacksHiLinkLocal(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-racks-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = "/tmp/hr2"
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	sw := HiLinkSwitches(r)
	if len(sw) != 2 || sw[0].HiLink.Name != "hl-sw0" || sw[1].HiLink.Name != "hl-sw1" {
		t.Fatalf("HiLink switches %+v", sw)
	}
	args := strings.Join(GPUArgs(r), " ")
	for _, want := range []string{
		"/tmp/hr2/vm-a/gpu0.sock,", "hilink=/tmp/hr2/hilink/hl-sw0/hilink-port0.sock,link-name=vm-a/gpu0",
		"hilink=/tmp/hr2/hilink/hl-sw0/hilink-port1.sock,link-name=vm-a/gpu1",
		"hilink=/tmp/hr2/hilink/hl-sw1/hilink-port0.sock,link-name=vm-c/gpu0",
		"hilink=/tmp/hr2/hilink/hl-sw1/hilink-port1.sock,link-name=vm-c/gpu1",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("no %q in %s", want, args)
		}
	}
	// Every GPU's port is on the HiLink switch of its guest's rack.
	for _, g := range r.Guests {
		for _, id := range g.GPUs.IDs {
			if p := HiLinkPort(r, g, id); !strings.HasPrefix(p, HiLinkDir(r, "hl-"+g.Switch)+"/") {
				t.Errorf("%s gpu %d: port %s outside rack %s", g.Name, id, p, g.Switch)
			}
		}
	}
	// The fabric joins the racks by their TORs, over Ethernet.
	fc := FabricSettings(r)
	if len(fc.Links) != 1 || fc.Links[0].A != "sw0:10" || fc.Links[0].B != "sw1:10" || r.SwitchLink("sw0") != LinkEth {
		t.Errorf("fabric links %+v (%s)", fc.Links, r.SwitchLink("sw0"))
	}
}

// TestHiLinkSpecErrors: every way of taking HiLink out of its rack, and
// bad ports and ids, is refused at the file, line and key.
func TestHiLinkSpecErrors(t *testing.T) {
	const two = "switches:\n  - name: sw0\n  - name: sw1\nlinks:\n  - {a: \"sw0:10\", b: \"sw1:10\"}\nguests:\n" +
		"  - {name: a, switch: sw0, gpus: {count: 2}}\n" // lines 1-7
	const one = "switches:\n  - name: sw0\n    hilink: {ports: 4}\nguests:\n  - {name: a, gpus: {count: 2}}\n" // lines 1-5
	for name, tc := range map[string]struct {
		spec string
		want string
	}{
		"other rack's switch": {two + "  - {name: c, switch: sw1, gpus: {count: 1, ids: [5], hilink: hl-sw0}}\n",
			`x.yaml:8: guests[1].gpus.hilink: guest c is in rack sw1 (switch sw1) but hl-sw0 is the HiLink switch of rack sw0: HiLink is rack-local, GPUs of two racks reach each other over RoCEv2 through the TORs`},
		"cable between HiLink switches": {"switches:\n  - name: sw0\n  - name: sw1\nlinks:\n  - {a: \"hl-sw0:7\", b: \"hl-sw1:7\"}\n",
			`x.yaml:5: links[0].a: hl-sw0:7 is a HiLink switch: HiLink is rack-local and takes no cable; GPUs of two racks reach each other over RoCEv2 through the TORs' link`},
		"cable to a HiLink switch": {"switches:\n  - name: sw0\n  - name: sw1\nlinks:\n  - a: \"sw0:9\"\n    b: \"hl-sw1:7\"\n",
			`x.yaml:6: links[0].b: hl-sw1:7 is a HiLink switch: HiLink is rack-local and takes no cable; GPUs of two racks reach each other over RoCEv2 through the TORs' link`},
		"unknown switch": {one + "  - {name: b, gpus: {count: 1, ids: [3], hilink: nvs0}}\n",
			`x.yaml:6: guests[1].gpus.hilink: guest b: no HiLink switch "nvs0" (the racks': hl-sw0; or none)`},
		"port out of range": {one + "  - {name: b, gpus: {count: 1, ids: [3], hilink-ports: [4]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports: guest b: port 4 of HiLink switch hl-sw0 is out of range 0..3`},
		"two GPUs on a port": {one + "  - {name: b, gpus: {count: 1, ids: [3], hilink-ports: [1]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports: guest b: port 1 of HiLink switch hl-sw0 is already a gpu_id 1's: one GPU per port`},
		"same port twice": {one + "  - {name: b, gpus: {count: 2, ids: [3, 4], hilink-ports: [2, 2]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports: guest b: port 2 of HiLink switch hl-sw0 is already b gpu_id 3's: one GPU per port`},
		"ports for count": {one + "  - {name: b, gpus: {count: 2, ids: [3, 4], hilink-ports: [2]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports: guest b: 1 ports [2] for 2 GPUs: give one port per GPU, or none for the next free ones`},
		"full switch": {one + "  - {name: b, gpus: {count: 3, ids: [3, 4, 5]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports: guest b: port 4 of HiLink switch hl-sw0 is out of range 0..3`},
		"gpu_id twice on a switch": {one + "  - {name: b, gpus: {count: 1}}\n",
			`x.yaml:6: guests[1].gpus.ids: guest b: gpu_id 0 is a's too, and HiLink switch hl-sw0 forwards by gpu_id: give the GPUs of one rack distinct ids`},
		"ports with none": {one + "  - {name: b, gpus: {count: 1, ids: [3], hilink: none, hilink-ports: [2]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports: guest b: hilink-ports with hilink: none`},
		"hilink without GPUs": {one + "  - {name: b, gpus: {hilink: hl-sw0}}\n",
			`x.yaml:6: guests[1].gpus.hilink: guest b: hilink or hilink-ports given without GPUs: set count`},
		"name taken": {"switches:\n  - name: sw0\n  - name: sw1\n    hilink: {name: sw0}\n",
			`x.yaml:4: switches[1].hilink.name: "sw0" already names a HiSwitch: give rack sw1's HiLink switch its own name`},
		"name none": {"switches:\n  - name: sw0\n    hilink: {name: none}\n",
			`x.yaml:3: switches[0].hilink.name: HiLink switch name "none": "none", or has '/', ':' or a space`},
		"too many ports": {"switches:\n  - name: sw0\n    hilink: {ports: 65}\n",
			`x.yaml:3: switches[0].hilink.ports: 65 is out of range 0 to 64`},
		"negative port": {one + "  - {name: b, gpus: {count: 1, ids: [3], hilink-ports: [-1]}}\n",
			`x.yaml:6: guests[1].gpus.hilink-ports[0]: -1 is out of range 0 to 63`},
	} {
		t.Run(name, func(t *testing.T) { checkSpecError(t, tc.spec, tc.want) })
	}
}
