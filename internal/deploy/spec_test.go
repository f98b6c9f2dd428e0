package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	fabricshared "github.com/PacketFive/hinic/internal/cli/fabric/shared"
	"github.com/PacketFive/hinic/internal/fabric"
)

func TestDefaultsCanonicalRack(t *testing.T) {
	r := &Rack{}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if len(r.Guests) != 2 {
		t.Fatalf("guests = %d", len(r.Guests))
	}
	for i, want := range []Guest{
		{Name: "vm-a", IP: "10.42.0.1", MAC: "52:54:00:42:00:01", Port: 1, SSHPort: 2222, NIC: NICRxe, Switch: "sw0"},
		{Name: "vm-b", IP: "10.42.0.2", MAC: "52:54:00:42:00:02", Port: 2, SSHPort: 2223, NIC: NICRxe, Switch: "sw0"},
	} {
		g := r.Guests[i]
		if g.Name != want.Name || g.IP != want.IP || g.MAC != want.MAC || g.Port != want.Port ||
			g.SSHPort != want.SSHPort || g.NIC != want.NIC || g.Switch != want.Switch {
			t.Errorf("guest %d = %+v, want %+v", i, g, want)
		}
	}
	if r.RunDir != filepath.Join(os.TempDir(), "hinic-rack-rack0") {
		t.Errorf("run dir %s", r.RunDir)
	}
}

func TestDefaultsErrors(t *testing.T) {
	for name, r := range map[string]Rack{
		"ip outside network": {Guests: []Guest{{Name: "a", IP: "10.0.0.1"}}},
		"duplicate name":     {Guests: []Guest{{Name: "a"}, {Name: "a"}}},
		"bad nic":            {Guests: []Guest{{Name: "a", NIC: "mlx5"}}},
		"unknown switch":     {Guests: []Guest{{Name: "a", Switch: "sw9"}}},
		"port out of range":  {Switches: []Switch{{Name: "sw0", Ports: 2}}, Guests: []Guest{{Name: "a", Port: 3}}},
		"accel kvm:tcg":      {Accel: "kvm:tcg"},
		"accel hvf":          {Accel: "hvf"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := r.Defaults(); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestExampleSpec(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-rxe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if r.Name != "rxe" || r.Pcap || len(r.Guests) != 2 || r.Guests[1].IP != "10.42.0.2" || r.BootTimeout.Seconds() != 300 {
		t.Errorf("got %+v", r)
	}
	// Unknown keys are an error.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nguets: []\n"), 0o644)
	if _, err := ReadRack(bad); err == nil || !strings.Contains(err.Error(), "guets") {
		t.Errorf("unknown key: err %v", err)
	}
}

func TestFabricConfig(t *testing.T) {
	r := &Rack{RunDir: "/tmp/x", Pcap: true}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	f := readFabricConfig(t, r)
	if f.RunDir != "/tmp/x/fab" || f.Pcap != "/tmp/x/pcap" || len(f.Switches) != 1 || len(f.Switches[0].Port) != 2 ||
		f.Switches[0].Port[1].Num != 2 || f.Switches[0].Port[1].Kind != "qemu-stream" {
		t.Errorf("got %+v", f)
	}
	if got := PortSocket(r, "sw0", 2); got != "/tmp/x/fab/sw0-port2.sock" {
		t.Errorf("PortSocket = %s", got)
	}
	if p := f.Switches[0].Port; trusts(p[0]) || trusts(p[1]) {
		t.Errorf("trust-pause without the guest asking: %+v", p)
	}
}

// TestRackTrustPause: a guest's trust-pause reaches its switch port (rxe,
// a qemu-stream port) or its vNIC (hicain), and nothing else.
func TestRackTrustPause(t *testing.T) {
	r := &Rack{RunDir: "/tmp/x", Guests: []Guest{
		{Name: "a", NIC: NICRxe, TrustPause: true},
		{Name: "b", NIC: NICHicain, TrustPause: true},
		{Name: "c", NIC: NICHicain},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	for _, p := range readFabricConfig(t, r).Switches[0].Port {
		if want := p.Num == r.Guests[0].Port; trusts(p) != want {
			t.Errorf("port %d (%s): trust-pause %v, want %v", p.Num, p.Kind, trusts(p), want)
		}
	}
	var vnics []string
	args := DeviceArgs(r)
	for i, a := range args {
		if a == "--vnic" {
			vnics = append(vnics, args[i+1])
		}
	}
	if len(vnics) != 2 || !strings.HasSuffix(vnics[0], ",trust-pause=true") || strings.Contains(vnics[1], "trust-pause") {
		t.Errorf("vNICs %q", vnics)
	}
}

// TestIBRackSpec reads the InfiniBand example: link ib guests on two
// switches, OpenSM in vm-a, and checks what the fabric and the device
// backend are given: InfiniBand ports (the cable's ends too), link=ib
// vNICs with the 4096-byte MTU.
func TestIBRackSpec(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-ib.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = "/tmp/x"
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if r.OpenSM != "vm-a" || r.Guests[0].Link != LinkIB || r.Guests[1].Link != LinkIB || r.SwitchLink("sw1") != LinkIB {
		t.Fatalf("got %+v", r)
	}
	f := readFabricConfig(t, r)
	for _, sw := range f.Switches {
		got := map[int]string{}
		for _, p := range sw.Port {
			got[p.Num] = p.Kind + "/" + p.Link
		}
		if got[1] != "seqpacket/ib" || got[10] != "/ib" || len(got) != 2 {
			t.Errorf("switch %s ports %v, want 1 seqpacket/ib and the cable's 10 ib", sw.Name, got)
		}
	}
	if len(f.Links) != 1 || f.Links[0].A != "sw0:10" {
		t.Errorf("links %+v", f.Links)
	}
	args := strings.Join(DeviceArgs(r), " ")
	for _, want := range []string{"name=vm-a/hicain0", "link=ib", "mtu=4096", "mac=52:54:00:44:00:02"} {
		if !strings.Contains(args, want) {
			t.Errorf("device serve args lack %q: %s", want, args)
		}
	}
}

func TestIBRackErrors(t *testing.T) {
	ib := func(name, sw string) Guest { return Guest{Name: name, NIC: NICHicain, Link: LinkIB, Switch: sw} }
	two := []Switch{{Name: "sw0"}, {Name: "sw1"}}
	for name, tc := range map[string]struct {
		r    Rack
		want string
	}{
		"ib on rxe":     {Rack{Guests: []Guest{{Name: "a", Link: LinkIB}}}, "needs nic hicain"},
		"bad link":      {Rack{Guests: []Guest{{Name: "a", NIC: NICHicain, Link: "fc"}}}, "valid link layers"},
		"mixed switch":  {Rack{Guests: []Guest{ib("a", ""), {Name: "b", NIC: NICHicain}}}, "link layers ib and eth"},
		"opensm no ib":  {Rack{OpenSM: "a", Guests: []Guest{{Name: "a"}}}, "no link ib guest"},
		"opensm not ib": {Rack{OpenSM: "c", Guests: []Guest{ib("a", ""), ib("b", "")}}, "not a link ib guest"},
		"eth-ib cable": {Rack{Switches: two, Links: []Link{{A: "sw0:10", B: "sw1:10"}},
			Guests: []Guest{ib("a", "sw0"), {Name: "b", NIC: NICHicain, Switch: "sw1"}}}, "joins an ib switch to an eth switch"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.r.Defaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	r := Rack{OpenSM: OpenSMNone, Guests: []Guest{ib("a", ""), ib("b", "")}}
	if err := r.Defaults(); err != nil || r.OpenSM != OpenSMNone {
		t.Errorf("opensm none: %v, %q", err, r.OpenSM)
	}
	r = Rack{Guests: []Guest{{Name: "a", NIC: NICHicain, Link: LinkEth}, ib("b", "sw1")}, Switches: two}
	if err := r.Defaults(); err != nil || r.OpenSM != "b" || r.SwitchLink("sw0") != LinkEth {
		t.Errorf("default opensm: %v, %q", err, r.OpenSM)
	}
}

// readFabricConfig reads FabricConfig's file as `hinic fabric serve
// --config` does: through the settings and the fabric's own loader, which
// refuses unknown keys.
func readFabricConfig(t *testing.T, r *Rack) fabric.Config {
	t.Helper()
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(FabricConfig(r))); err != nil {
		t.Fatal(err)
	}
	c, err := fabricshared.LoadConfig(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// trusts reports whether the config sets the port to obey PAUSE frames.
func trusts(p fabric.PortConfig) bool { return p.TrustPause != nil && *p.TrustPause }

// TestRoCETwoRackSpec reads the RoCEv2 two-rack example: hicain guests
// on Ethernet, each on its own switch, the switches joined by a cable,
// and checks what the fabric and the device backend are given: the
// guests' seqpacket Ethernet ports and a plain (Ethernet) link, RoCEv2
// vNICs at the 4096-byte MTU, no subnet manager.
func TestRoCETwoRackSpec(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-racks-roce.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = "/tmp/x"
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if r.OpenSM != "" || r.SwitchLink("sw0") != LinkEth || r.SwitchLink("sw1") != LinkEth || r.Guests[1].Switch != "sw1" {
		t.Fatalf("got %+v", r)
	}
	f := readFabricConfig(t, r)
	if len(f.Switches) != 2 || len(f.Links) != 1 || f.Links[0].A != "sw0:10" || f.Links[0].B != "sw1:10" {
		t.Fatalf("fabric %+v", f)
	}
	for _, sw := range f.Switches {
		// Port 1 is the guest's; the cable's port 10 needs no entry:
		// a default port is a seqpacket Ethernet port, what a link
		// takes.
		if len(sw.Port) != 1 || sw.Port[0].Num != 1 || sw.Port[0].Kind != "seqpacket" || sw.Port[0].Link != "" {
			t.Errorf("switch %s ports %+v", sw.Name, sw.Port)
		}
	}
	args := strings.Join(DeviceArgs(r), " ")
	for _, want := range []string{"name=vm-a/hicain0", "link=eth", "mtu=4096", "sw1-port1.sock"} {
		if !strings.Contains(args, want) {
			t.Errorf("device serve args lack %q: %s", want, args)
		}
	}
}

// TestRackMetrics: a rack's metrics address reaches the fabric's config
// and, one and two ports on, the device and GPU backends' command
// lines; a bad one is refused at its line.
func TestRackMetrics(t *testing.T) {
	r, err := ParseRack([]byte("metrics: 127.0.0.1:9464\nguests:\n  - {name: a, nic: hicain, gpus: {count: 1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = "/tmp/x"
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Fabric struct {
			Metrics string `yaml:"metrics"`
		} `yaml:"fabric"`
	}
	if err := yaml.Unmarshal(FabricConfig(r), &doc); err != nil || doc.Fabric.Metrics != "127.0.0.1:9464" {
		t.Errorf("fabric config metrics %q (%v)", doc.Fabric.Metrics, err)
	}
	if args := strings.Join(DeviceArgs(r), " "); !strings.Contains(args, "--metrics 127.0.0.1:9465") {
		t.Errorf("device serve %s", args)
	}
	if args := strings.Join(GPUArgs(r), " "); !strings.Contains(args, "--metrics 127.0.0.1:9466") {
		t.Errorf("gpu serve %s", args)
	}
	r = &Rack{}
	if err := r.Defaults(); err != nil || strings.Contains(string(FabricConfig(r)), "metrics") ||
		strings.Contains(strings.Join(DeviceArgs(r), " "), "--metrics") {
		t.Errorf("a rack without metrics: %v", err)
	}
	for _, bad := range []string{"metrics: 9464\n", "metrics: 'a b:1'\n", "metrics: localhost:65534\n"} {
		r, err := ParseRack([]byte(bad))
		if err == nil {
			err = r.Defaults()
		}
		if err == nil || !strings.Contains(err.Error(), "line 1: metrics: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestFabricConfigRoundTrip: the file deploy writes is, read back as
// `hinic fabric serve --config` reads it, the fabric.Config deploy
// built, for each example rack and for guests that trust PAUSE.
func TestFabricConfigRoundTrip(t *testing.T) {
	racks := map[string]*Rack{
		"default": {RunDir: "/tmp/x", Pcap: true},
		"trust-pause": {RunDir: "/tmp/x", Guests: []Guest{
			{Name: "a", NIC: NICRxe, TrustPause: true}, {Name: "b", NIC: NICHicain, TrustPause: true}}},
	}
	for _, spec := range []string{"two-ib.yaml", "two-racks-roce.yaml"} {
		r, err := ReadRack("../../testdata/racks/" + spec)
		if err != nil {
			t.Fatal(err)
		}
		r.RunDir = "/tmp/x"
		racks[spec] = r
	}
	for name, r := range racks {
		t.Run(name, func(t *testing.T) {
			if err := r.Defaults(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(FabricSettings(r), readFabricConfig(t, r)); diff != "" {
				t.Errorf("read back (-built +read):\n%s", diff)
			}
		})
	}
}
