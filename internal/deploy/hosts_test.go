package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/image"
	"github.com/PacketFive/hinic/internal/netns"
)

// TestHostRack splits the two-host spec into its hosts' racks: each
// with its own host, switch, guest and run directory, and the link
// between the hosts a VXLAN port on each side between the two
// addresses; the guest's SSH forward on its host's address, dialled in
// its namespace.
func TestHostRack(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-hosts-netns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = "/run/x"
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if !r.spansHosts() || r.netns() != "" {
		t.Fatalf("spansHosts %v, netns %q", r.spansHosts(), r.netns())
	}
	for i, want := range []struct {
		host, ns, addr, remote, sw, guest, fwd string
	}{
		{"a", "hn-twohost-a", "192.0.2.1", "192.0.2.2", "sw-a", "vm-a", "192.0.2.1:2370"},
		{"b", "hn-twohost-b", "192.0.2.2", "192.0.2.1", "sw-b", "vm-b", "192.0.2.2:2371"},
	} {
		sub := r.HostRack(want.host)
		if err := sub.Defaults(); err != nil {
			t.Fatalf("host %s: %v", want.host, err)
		}
		if sub.spansHosts() || sub.netns() != want.ns || sub.RunDir != "/run/x/"+want.host {
			t.Errorf("host %s: spansHosts %v, netns %q, run dir %s", want.host, sub.spansHosts(), sub.netns(), sub.RunDir)
		}
		if len(sub.Switches) != 1 || sub.Switches[0].Name != want.sw || len(sub.Guests) != 1 || sub.Guests[0].Name != want.guest {
			t.Fatalf("host %s: switches %+v, guests %+v", want.host, sub.Switches, sub.Guests)
		}
		wantLink := []Link{{A: want.sw + ":10", Remote: want.remote, Local: want.addr, VNI: 5700}}
		if d := cmp.Diff(wantLink, sub.Links); d != "" {
			t.Errorf("host %s: links (-want +got):\n%s", want.host, d)
		}
		ports := FabricSettings(sub).Switches[0].Port
		j := slices.IndexFunc(ports, func(p fabric.PortConfig) bool { return p.Num == 10 })
		if j < 0 || ports[j].Kind != fabric.KindVXLAN || ports[j].Remote != want.remote || ports[j].Local != want.addr || ports[j].VNI != 5700 {
			t.Errorf("host %s: fabric ports %+v", want.host, ports)
		}
		g := sub.Guests[0]
		if g.SSHPort != 2370+i || g.Host != want.host {
			t.Errorf("host %s: guest %+v", want.host, g)
		}
		fwd, ns := sub.guestSSH(g)
		if fwd != want.fwd || ns != want.ns {
			t.Errorf("host %s: SSH %s in %q", want.host, fwd, ns)
		}
		args := QEMUArgs(sub, g, &image.Manifest{}, "/img", "/run/x/"+want.guest, "tcg", "ssh-ed25519 AAAA")
		if !slices.Contains(args, "user,id=mgmt,hostfwd=tcp:"+want.fwd+"-:22") {
			t.Errorf("host %s: QEMU args %v", want.host, args)
		}
	}
	if r.HostRack("c") != nil {
		t.Error("HostRack of a host the rack does not name")
	}
}

// TestOneHostUnchanged: a rack without hosts keeps its guests' SSH on
// loopback in this namespace and its links within the machine.
func TestOneHostUnchanged(t *testing.T) {
	r := &Rack{Switches: []Switch{{Name: "sw0"}, {Name: "sw1"}}, Links: []Link{{A: "sw0:10", B: "sw1:10"}},
		Guests: []Guest{{Name: "a"}, {Name: "b", Switch: "sw1"}}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if r.spansHosts() || r.netns() != "" {
		t.Fatal("a rack without hosts spans hosts")
	}
	if fwd, ns := r.guestSSH(r.Guests[1]); fwd != "127.0.0.1:2223" || ns != "" {
		t.Errorf("SSH %s in %q", fwd, ns)
	}
	if c := FabricSettings(r); len(c.Links) != 1 {
		t.Errorf("links %+v", c.Links)
	}
	args := QEMUArgs(r, r.Guests[0], &image.Manifest{}, "/img", "/run/a", "tcg", "k")
	if !slices.Contains(args, "user,id=mgmt,hostfwd=tcp:127.0.0.1:2222-:22") {
		t.Errorf("QEMU args %v", args)
	}
}

// TestHostsSpecErrors: bad hosts, placements and links across hosts are
// reported at their file, line and key.
func TestHostsSpecErrors(t *testing.T) {
	const hosts = "hosts:\n  - {name: a, address: 192.0.2.1, netns: na}\n  - {name: b, address: 192.0.2.2, netns: nb}\n" // lines 1-3
	const sw = "switches:\n  - {name: s0, host: a}\n  - {name: s1, host: b}\n"                                           // lines 4-6
	for name, tc := range map[string]struct {
		spec string
		want string
	}{
		"no hosts":       {"switches:\n  - {name: s0, host: a}\n", `x.yaml:2: switches[0].host: "a": the rack names no hosts`},
		"guest no hosts": {"guests:\n  - {name: g, host: a}\n", `x.yaml:2: guests[0].host: "a": the rack names no hosts`},
		"vni one host":   {"switches: [{name: s0}, {name: s1}]\nlinks:\n  - {a: \"s0:9\", b: \"s1:9\", vni: 7}\n", `x.yaml:3: links[0].vni: 7: a link between two switches of one host has no vni (name hosts to span several)`},
		"address":        {"hosts:\n  - {name: a, address: hostA}\n", `x.yaml:2: hosts[0].address: host a: "hostA" is not an IP address (the host's address on the underlay)`},
		"name":           {"hosts:\n  - {name: \"a b\", address: 192.0.2.1}\n", `x.yaml:2: hosts[0].name: host name "a b": empty, duplicate or has '/', ':' or a space`},
		"same address":   {"hosts:\n  - {name: a, address: 192.0.2.1, netns: na}\n  - {name: b, address: 192.0.2.1, netns: nb}\n", `x.yaml:3: hosts[1].address: host b: 192.0.2.1 is another host's address`},
		"same netns":     {"hosts:\n  - {name: a, address: 192.0.2.1, netns: na}\n  - {name: b, address: 192.0.2.2, netns: na}\n", `x.yaml:3: hosts[1].netns: host b: netns "na": duplicate or not a namespace name`},
		"unknown host":   {hosts + "switches:\n  - {name: s0, host: c}\n", `x.yaml:5: switches[0].host: switch s0: no host "c"`},
		"idle host":      {hosts + "switches:\n  - {name: s0, host: a}\n", `x.yaml:1: hosts: host b has no switch: give one switches[].host: b`},
		"guest's host":   {hosts + sw + "guests:\n  - {name: g, switch: s1, host: a}\n", `x.yaml:8: guests[0].host: guest g: host "a", but its switch s1 is on b`},
		"no vni":         {hosts + sw + "links:\n  - {a: \"s0:9\", b: \"s1:9\"}\n", `x.yaml:8: links[0].vni: 0: link s0:9-s1:9 joins hosts a and b: it is a VXLAN link and needs a vni, 1 to 16777215`},
		"vni in host":    {hosts + sw + "  - {name: s2, host: a}\nlinks:\n  - {a: \"s0:9\", b: \"s2:9\", vni: 4}\n", `x.yaml:9: links[0].vni: 4: link s0:9-s2:9 is within host a and has no vni`},
		"ssh twice":      {hosts + sw + "guests:\n  - {name: g, switch: s1}\n  - {name: h, switch: s1, ssh-port: 2222}\n", `x.yaml:9: guests[1].ssh-port: guest h: SSH 192.0.2.2:2222 is guest g's too`},
	} {
		t.Run(name, func(t *testing.T) {
			if err := specError(t, tc.spec); err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// TestSpawnInNetns starts a daemon in a network namespace: it runs
// there, and its pid is the daemon's own (ip netns exec execs it), so
// that alive and stop recognise it. It needs root and iproute2.
func TestSpawnInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	ns := "hn-spawn-" + strings.ReplaceAll(t.Name(), "/", "-")[len("Test"):]
	_ = exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	if err := netns.Check(ns); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "ns")
	d := daemon{what: "test daemon", netns: ns,
		args:    []string{"-c", `readlink /proc/self/ns/net > ` + out + `.tmp && mv ` + out + `.tmp ` + out + ` && exec sleep 30`},
		logPath: filepath.Join(dir, "log"), pidPath: filepath.Join(dir, "pid"),
		ready: func() bool { _, err := os.Stat(out); return err == nil }}
	pid, exe, err := spawn(context.Background(), "/bin/sh", d)
	if pid != 0 {
		defer syscall.Kill(pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := os.Readlink("/proc/self/ns/net")
	var want syscall.Stat_t
	if err := syscall.Stat(netns.Path(ns), &want); err != nil {
		t.Fatal(err)
	}
	var got syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &got); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b)) == own || got.Ino != want.Ino {
		t.Errorf("the daemon runs in %s (inode %d), want namespace %s (inode %d)", strings.TrimSpace(string(b)), got.Ino, ns, want.Ino)
	}
	if p := (proc{exe: "sleep", args: []string{"30"}}); !alive(pid, p) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		t.Errorf("pid %d (%s run through ip netns exec) is not the daemon: %q", pid, exe, b)
	}
}

// TestUpUnknownHost: deploy rack --host of a host the rack does not name
// is refused before anything starts.
func TestUpUnknownHost(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-hosts-netns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = filepath.Join(t.TempDir(), "run")
	_, err = Up(context.Background(), r, UpOptions{Host: "c"})
	if err == nil || err.Error() != `deploy: the rack has no host "c" (its hosts: a, b)` {
		t.Errorf("err %v", err)
	}
	if _, serr := os.Stat(r.RunDir); serr == nil {
		t.Error("the refused deploy made the run directory")
	}
}

// TestHostsStatusJSON: in the status of a rack that spans hosts, each
// host's entry keeps its own name, address and run directory beside its
// part's status (an embedded part's name and run_dir would collide with
// the host's, and encoding/json would drop both).
func TestHostsStatusJSON(t *testing.T) {
	dir := t.TempDir()
	st := &State{Rack: Rack{Name: "two", RunDir: dir}, Hosts: []HostState{
		{Host: Host{Name: "h1", Address: "10.0.0.1", Netns: "ns1"}, RunDir: filepath.Join(dir, "h1")},
		{Host: Host{Name: "h2", Address: "10.0.0.2"}, RunDir: filepath.Join(dir, "h2")},
	}}
	rs, err := hostsStatus(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Hosts []struct {
			Name    string `json:"name"`
			Address string `json:"address"`
			Netns   string `json:"netns"`
			RunDir  string `json:"run_dir"`
			Status  struct {
				Name   string `json:"name"`
				Down   bool   `json:"down"`
				Fabric string `json:"fabric"`
			} `json:"status"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Hosts) != 2 {
		t.Fatalf("%s", b)
	}
	for i, h := range got.Hosts {
		want := st.Hosts[i]
		if h.Name != want.Name || h.Address != want.Address || h.Netns != want.Netns || h.RunDir != want.RunDir ||
			!h.Status.Down || h.Status.Fabric != "stopped" {
			t.Errorf("host %d: %+v\n%s", i, h, b)
		}
	}
}
