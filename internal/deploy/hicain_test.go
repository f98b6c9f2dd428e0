package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/image"
)

// hicainRack is a rack with an rxe guest and two hicain guests, defaults
// filled in.
func hicainRack(t *testing.T, mtu int) *Rack {
	t.Helper()
	r := &Rack{RunDir: "/tmp/hr", MTU: mtu, Guests: []Guest{
		{Name: "vm-a", NIC: NICHicain, Memory: 2048},
		{Name: "vm-r"},
		{Name: "vm-b", NIC: NICHicain, Port: 7},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestExampleHicainSpec(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-hicain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if r.Name != "hicain" || len(r.Guests) != 2 || r.Network != "10.43.0.0/24" {
		t.Errorf("got %+v", r)
	}
	for i, g := range r.Guests {
		if g.NIC != NICHicain || g.SSHPort != 2232+i || g.Port != i+1 {
			t.Errorf("guest %d: %+v", i, g)
		}
	}
	// Next to the rxe rack: no SSH port, address or MAC in common.
	rxe, err := ReadRack("../../testdata/racks/two-rxe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := rxe.Defaults(); err != nil {
		t.Fatal(err)
	}
	for _, a := range rxe.Guests {
		for _, b := range r.Guests {
			if a.SSHPort == b.SSHPort || a.IP == b.IP || a.MAC == b.MAC {
				t.Errorf("rxe %+v and hicain %+v clash", a, b)
			}
		}
	}
}

func TestFabricConfigPortKinds(t *testing.T) {
	r := hicainRack(t, 0)
	got := map[int]string{}
	for _, p := range readFabricConfig(t, r).Switches[0].Port {
		got[p.Num] = p.Kind
		// The rxe guest's port dials its QEMU's stream server; the
		// others listen.
		if want := map[bool]string{true: "/tmp/hr/fab/sw0-port2.qemu.sock"}[p.Num == 2]; p.Dial != want {
			t.Errorf("port %d: dial %q, want %q", p.Num, p.Dial, want)
		}
	}
	// vm-a takes port 1, vm-r port 2; vm-b names port 7.
	want := map[int]string{1: "seqpacket", 2: "qemu-stream", 7: "seqpacket"}
	if len(got) != len(want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	for n, k := range want {
		if got[n] != k {
			t.Errorf("port %d: kind %q, want %q", n, got[n], k)
		}
	}
}

func TestDeviceMTU(t *testing.T) {
	for _, tc := range []struct{ rack, want int }{
		// The RoCE MTU of the netdev MTU after 96 bytes of RoCEv2
		// headers (iboe_get_mtu), at least 256.
		{0, 1024}, {256, 256}, {300, 256}, {1500, 1024}, {2048, 1024}, {2144, 2048}, {4000, 2048},
		{4096, 2048}, {4191, 2048}, {4192, 4096}, {9000, 4096},
	} {
		if got := DeviceMTU(&Rack{MTU: tc.rack}); got != tc.want {
			t.Errorf("rack mtu %d: device mtu %d, want %d", tc.rack, got, tc.want)
		}
	}
}

func TestActiveMTU(t *testing.T) {
	for _, tc := range []struct {
		nic, link string
		rack      int
		want      int
	}{
		{NICRxe, LinkEth, 0, 1024}, {NICRxe, LinkEth, 4096, 2048}, {NICRxe, LinkEth, 4175, 2048},
		{NICRxe, LinkEth, 4176, 4096}, {NICRxe, LinkEth, 9000, 4096},
		{NICHicain, LinkEth, 0, 1024}, {NICHicain, LinkEth, 4176, 2048}, {NICHicain, LinkEth, 9000, 4096},
		{NICHicain, LinkIB, 0, 0}, {NICHicain, LinkIB, 9000, 0},
	} {
		r := &Rack{MTU: tc.rack}
		if got := ActiveMTU(r, Guest{NIC: tc.nic, Link: tc.link}); got != tc.want {
			t.Errorf("%s %s, rack mtu %d: active MTU %d, want %d", tc.nic, tc.link, tc.rack, got, tc.want)
		}
	}
}

func TestDefaultsHicainMTU(t *testing.T) {
	for _, tc := range []struct {
		nic string
		mtu int
		ok  bool
	}{
		{NICHicain, 0, true}, {NICHicain, 256, true}, {NICHicain, 4096, true}, {NICHicain, 9000, true},
		{NICHicain, 255, false}, {NICHicain, 9001, false}, {NICHicain, -1, false},
		{NICRxe, 9000, true}, {NICRxe, -1, false},
	} {
		r := &Rack{MTU: tc.mtu, Guests: []Guest{{Name: "a", NIC: tc.nic}}}
		if err := r.Defaults(); (err == nil) != tc.ok {
			t.Errorf("%s mtu %d: err %v, want ok=%v", tc.nic, tc.mtu, err, tc.ok)
		}
	}
}

func TestDeviceArgs(t *testing.T) {
	r := hicainRack(t, 9000)
	args := DeviceArgs(r)
	want := []string{"device", "serve", "--control", "/tmp/hr/device.sock", "--config", "/tmp/hr/fabric.yaml", "--fabric",
		"--vnic", "name=vm-a/hicain0,socket=/tmp/hr/vm-a/ivshmem.sock,ram=/tmp/hr/vm-a/ram,ram-size=2048M,machine=pc," +
			"port=/tmp/hr/fab/sw0-port1.sock,mac=52:54:00:42:00:01,ip=10.42.0.1,allow-ip=10.42.0.1,link=eth,vectors=8,mtu=4096",
		"--vnic", "name=vm-b/hicain0,socket=/tmp/hr/vm-b/ivshmem.sock,ram=/tmp/hr/vm-b/ram,ram-size=1024M,machine=pc," +
			"port=/tmp/hr/fab/sw0-port7.sock,mac=52:54:00:42:00:03,ip=10.42.0.3,allow-ip=10.42.0.3,link=eth,vectors=8,mtu=4096",
	}
	if !slices.Equal(args, want) {
		t.Errorf("device args\n got %q\nwant %q", args, want)
	}
	// Split, the fabric is a process of its own.
	r.Daemons = DaemonsSplit
	want = slices.Delete(want, 4, 7)
	if args := DeviceArgs(r); !slices.Equal(args, want) {
		t.Errorf("device args, daemons split\n got %q\nwant %q", args, want)
	}
	if fabricProc(r, "/bin/hinic").args[0] != "fabric" {
		t.Errorf("daemons split: the fabric's process is %v", fabricProc(r, "/bin/hinic"))
	}
	r.Daemons = DaemonsJoined
	if got, want := fabricProc(r, "/bin/hinic"), deviceProc(r, "/bin/hinic"); !slices.Equal(got.args, want.args) {
		t.Errorf("daemons joined: the fabric's process is %v, want the backend's %v", got, want)
	}
}

func TestDefaultsDaemons(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"", DaemonsJoined, true}, {DaemonsJoined, DaemonsJoined, true}, {DaemonsSplit, DaemonsSplit, true}, {"both", "", false}} {
		r := &Rack{Daemons: tc.in}
		err := r.Defaults()
		if (err == nil) != tc.ok || (tc.ok && r.Daemons != tc.want) {
			t.Errorf("daemons %q: got %q, err %v; want %q, ok=%v", tc.in, r.Daemons, err, tc.want, tc.ok)
		}
	}
}

func TestQEMUArgsDataNIC(t *testing.T) {
	r := hicainRack(t, 0)
	m := &image.Manifest{Cmdline: "root=/dev/vda rw"}
	hic := strings.Join(QEMUArgs(r, r.Guests[0], m, "/img", "/tmp/hr/vm-a", "tcg", "ssh-ed25519 AAAA k"), " ")
	for _, want := range []string{
		"-m 2048 ",
		"-machine pc,memory-backend=ram0 ",
		"-object memory-backend-file,id=ram0,size=2048M,mem-path=/tmp/hr/vm-a/ram,share=on ",
		"-chardev socket,path=/tmp/hr/vm-a/ivshmem.sock,id=ivs0 ",
		// The qdev ids deploy restart device finds it by, and the
		// monitor it does that through.
		"-device ivshmem-doorbell,chardev=ivs0,vectors=8,id=hicain0 ",
		"-qmp unix:/tmp/hr/vm-a/qmp.sock,server=on,wait=off ",
		"-netdev user,id=mgmt,hostfwd=tcp:127.0.0.1:2222-:22 ",
	} {
		if !strings.Contains(hic, want) {
			t.Errorf("hicain guest: no %q in\n%s", want, hic)
		}
	}
	for _, bad := range []string{"netdev=data", "-netdev stream"} {
		if strings.Contains(hic, bad) {
			t.Errorf("hicain guest has %q:\n%s", bad, hic)
		}
	}
	// The management NIC comes first, so that it stays ens3.
	if strings.Index(hic, "netdev=mgmt") > strings.Index(hic, "ivshmem-doorbell") {
		t.Errorf("the ivshmem function comes before the management NIC:\n%s", hic)
	}

	rxe := strings.Join(QEMUArgs(r, r.Guests[1], m, "/img", "/tmp/hr/vm-r", "tcg", "k"), " ")
	for _, want := range []string{
		"-machine pc ",
		"-netdev stream,id=data,server=on,addr.type=unix,addr.path=/tmp/hr/fab/sw0-port2.qemu.sock ",
		"-device virtio-net-pci,netdev=data,mac=52:54:00:42:00:02 ",
	} {
		if !strings.Contains(rxe, want) {
			t.Errorf("rxe guest: no %q in\n%s", want, rxe)
		}
	}
	if strings.Contains(rxe, "ivshmem") || strings.Contains(rxe, "memory-backend") {
		t.Errorf("rxe guest has the HiNIC:\n%s", rxe)
	}
}

func TestCheckPaths(t *testing.T) {
	long := "vm-" + strings.Repeat("a", 90)
	for _, tc := range []struct {
		name, runDir, guest, nic string
		ok                       bool
	}{
		{"short", "/tmp/hr", "vm-a", NICHicain, true},
		{"ivshmem socket too long", "/tmp/hr", long, NICHicain, false},
		{"long guest name without hicain", "/tmp/hr", long, NICRxe, true},
		{"port socket too long", "/tmp/" + strings.Repeat("d", 90), "vm-a", NICRxe, false},
		{"comma", "/tmp/a,b", "vm-a", NICHicain, false},
		{"comma without hicain", "/tmp/a,b", "vm-a", NICRxe, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Rack{RunDir: tc.runDir, Guests: []Guest{{Name: tc.guest, NIC: tc.nic}}}
			if err := r.Defaults(); err != nil {
				t.Fatal(err)
			}
			if err := checkPaths(r); (err == nil) != tc.ok {
				t.Errorf("err %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestIPv4GIDTail(t *testing.T) {
	for ip, want := range map[string]string{"10.43.0.1": "0a2b:0001", "192.168.255.254": "c0a8:fffe"} {
		if got := ipv4GIDTail(ip); got != want {
			t.Errorf("%s: %s, want %s", ip, got, want)
		}
	}
}

func TestHicainScript(t *testing.T) {
	r := hicainRack(t, 2048)
	s := HicainScript(r, r.Guests[0], "ens4")
	lines := strings.Split(strings.TrimSpace(s), "\n")
	want := []string{
		"set -e",
		"ip link set dev ens4 mtu 2048",
		"ip addr replace 10.42.0.1/24 dev ens4",
		"ip link set dev ens4 up",
		"modprobe hicain_ib",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("script\n got %q\nwant %q", lines, want)
	}
	// Without a rack MTU the driver's default stays.
	if s := HicainScript(hicainRack(t, 0), r.Guests[0], "ens4"); strings.Contains(s, " mtu ") {
		t.Errorf("MTU set without a rack mtu:\n%s", s)
	}
}

// TestE2ERacksMTU: the RoCE racks of make e2e (testdata/racks) run every
// guest, Soft-RoCE and HiNIC, at the RoCE active MTU 4096, the largest
// both take, so their figures compare; and no two specs share an SSH
// port, data address or MAC.
func TestE2ERacksMTU(t *testing.T) {
	files, err := filepath.Glob("../../testdata/racks/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("rack specs %v, %v", files, err)
	}
	seen := map[string]string{}
	for _, f := range files {
		r, err := ReadRack(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Defaults(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range r.Guests {
			if g.Link == LinkEth {
				if got := ActiveMTU(r, g); got != 4096 {
					t.Errorf("%s: guest %s (%s): active MTU %d at mtu %d, want 4096", f, g.Name, g.NIC, got, r.MTU)
				}
			}
			for _, k := range []string{fmt.Sprint("ssh ", g.SSHPort), "ip " + g.IP, "mac " + g.MAC} {
				if other, ok := seen[k]; ok {
					t.Errorf("%s: guest %s: %s already in %s", f, g.Name, k, other)
				}
				seen[k] = f + " " + g.Name
			}
		}
	}
}
