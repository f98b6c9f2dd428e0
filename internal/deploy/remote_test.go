package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseSSHDest reads hosts[].ssh values and refuses what ssh would
// take for an option or the shell for more than one word.
func TestParseSSHDest(t *testing.T) {
	for in, want := range map[string]sshDest{
		"b":                       {Host: "b"},
		"root@192.0.2.2":          {User: "root", Host: "192.0.2.2"},
		"root@192.0.2.2:2522":     {User: "root", Host: "192.0.2.2", Port: 2522},
		"lab.example.org:22":      {Host: "lab.example.org", Port: 22},
		"2001:db8::2":             {Host: "2001:db8::2"},
		"u@[2001:db8::2]:2200":    {User: "u", Host: "2001:db8::2", Port: 2200},
		"[2001:db8::2]":           {Host: "2001:db8::2"},
		"deploy_user@node-7.lan1": {User: "deploy_user", Host: "node-7.lan1"},
	} {
		got, err := parseSSHDest(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-oProxyCommand=x", "root@-p", "@b", "a@b@c", "b:0", "b:65536", "b:x", "a b", "b;reboot",
		"$(id)", "b/c", "'b'", "u@[::1", "-b", "[0:]", "[b:c]", "1:2:3"} {
		if d, err := parseSSHDest(bad); err == nil {
			t.Errorf("%q: accepted as %+v", bad, d)
		}
	}
}

// TestSSHArgv: the command line that reaches an ssh host, in batch mode,
// with HINIC_SSH's words first, and the remote command one shell word
// per argument.
func TestSSHArgv(t *testing.T) {
	h := Host{Name: "b", SSH: "root@192.0.2.2:2522"}
	t.Setenv(EnvSSH, "")
	remote := shellJoin("hinic", "deploy", "status", "--run-dir", "/tmp/it's here", "-o", "json")
	if remote != `hinic deploy status --run-dir '/tmp/it'\''s here' -o json` {
		t.Errorf("remote command %s", remote)
	}
	want := []string{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "-p", "2522", "root@192.0.2.2", remote}
	if d := cmp.Diff(want, h.sshArgv(remote)); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	t.Setenv(EnvSSH, "ssh -F /tmp/x/ssh_config  -o ConnectTimeout=5")
	want = []string{"ssh", "-F", "/tmp/x/ssh_config", "-o", "ConnectTimeout=5", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "b", "true"}
	if d := cmp.Diff(want, Host{Name: "b", SSH: "b"}.sshArgv("true")); d != "" {
		t.Errorf("argv with %s (-want +got):\n%s", EnvSSH, d)
	}
	if got := shellQuote(""); got != "''" {
		t.Errorf("empty word: %s", got)
	}
}

// TestRemoteSpecErrors: ssh hosts' keys are checked with the spec, at
// their file, line and key.
func TestRemoteSpecErrors(t *testing.T) {
	const tail = "switches:\n  - {name: s0, host: a}\n  - {name: s1, host: b}\n"
	for name, tc := range map[string]struct {
		hostB string // the second host's line
		want  string
	}{
		"bad ssh":      {"{name: b, address: 192.0.2.2, ssh: \"-oProxyCommand=sh\"}", `x.yaml:3: hosts[1].ssh: host b: ssh "-oProxyCommand=sh": host "-oProxyCommand=sh" is not a host name or address`},
		"bad port":     {"{name: b, address: 192.0.2.2, ssh: \"root@b:99999\"}", `x.yaml:3: hosts[1].ssh: host b: ssh "root@b:99999": port "99999" is not 1 to 65535`},
		"ssh netns":    {"{name: b, address: 192.0.2.2, ssh: b, netns: nb}", `x.yaml:3: hosts[1].ssh: host b: an ssh host is another machine, a netns one is a namespace of this one: give it one of ssh and netns`},
		"hinic no ssh": {"{name: b, address: 192.0.2.2, hinic: /usr/bin/hinic}", `x.yaml:3: hosts[1].hinic: host b: hinic is for a host reached over ssh: give it ssh: [USER@]HOST[:PORT]`},
		"dir no ssh":   {"{name: b, address: 192.0.2.2, run-dir: /tmp/r}", `x.yaml:3: hosts[1].run-dir: host b: run-dir is for a host reached over ssh: give it ssh: [USER@]HOST[:PORT]`},
		"dir relative": {"{name: b, address: 192.0.2.2, ssh: b, run-dir: tmp/r}", `x.yaml:3: hosts[1].run-dir: host b: "tmp/r" is not an absolute path`},
		"remote virt":  {"{name: b, address: 192.0.2.2, ssh: b, libvirt: \"qemu+ssh://b/system\"}", `x.yaml:3: hosts[1].libvirt: host b: qemu+ssh://b/system: the hinic of an ssh host drives the libvirtd of that machine itself: give it its local URI, libvirt: qemu:///system`},
	} {
		t.Run(name, func(t *testing.T) {
			spec := "hosts:\n  - {name: a, address: 192.0.2.1}\n  - " + tc.hostB + "\n" + tail
			if err := specError(t, spec); err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
	spec := "hosts:\n  - {name: a, address: 192.0.2.1}\n  - {name: b, address: 192.0.2.2, ssh: \"root@b:2522\", hinic: /opt/hinic, run-dir: /srv/r, libvirt: \"qemu:///system\"}\n" + tail
	if err := specError(t, spec); err != nil {
		t.Errorf("a good ssh host: %v", err)
	}
}

// TestRemoteSpecRoundTrip: the spec deploy copies to an ssh host reads
// back, through the loader's checks, as the same rack, and that host's
// part of it is the part the controller computes, with image paths made
// absolute.
func TestRemoteSpecRoundTrip(t *testing.T) {
	for _, f := range []string{"two-hosts-netns.yaml", "two-hosts-ib-netns.yaml"} {
		r, err := ReadRack(filepath.Join("../../testdata/racks", f))
		if err != nil {
			t.Fatal(err)
		}
		r.Hosts[1].Netns, r.Hosts[1].SSH, r.Hosts[1].RemoteRunDir = "", "root@192.0.2.2:2522", "/srv/hinic"
		r.RunDir = "/run/x"
		r.Guests[0].Image = "img/other"
		r.Guests[1].Debs = []string{"debs/x.deb"}
		r.Guests[1].Files = []string{"f.conf:/etc/f.conf"}
		if err := r.Defaults(); err != nil {
			t.Fatal(err)
		}
		b, err := remoteSpec(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseRack(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", f, err, b)
		}
		if err := back.Defaults(); err != nil {
			t.Fatalf("%s: %v\n%s", f, err, b)
		}
		wd, _ := os.Getwd()
		want := r.HostRack("b")
		want.Image = filepath.Join(wd, r.Image)
		for i := range want.Guests {
			want.Guests[i].Image = filepath.Join(wd, want.Guests[i].Image)
		}
		want.Guests[0].Debs = []string{filepath.Join(wd, "debs/x.deb")}
		want.Guests[0].Files = []string{filepath.Join(wd, "f.conf") + ":/etc/f.conf"}
		if d := cmp.Diff(want, back.HostRack("b"), cmp.AllowUnexported(Rack{}), cmp.FilterPath(func(p cmp.Path) bool {
			return p.Last().String() == ".src"
		}, cmp.Ignore())); d != "" {
			t.Errorf("%s: host b's part (-controller +remote):\n%s", f, d)
		}
	}
}

// standIn writes an executable shell script.
func standIn(t *testing.T, path, script string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteUpStatusDown deploys, asks and takes down a rack whose two
// hosts are reached over SSH, with a stand-in ssh (HINIC_SSH) that runs
// the remote command here and a stand-in hinic that answers as a host's
// part would: the key pair and spec copied into each part's remote run
// directory, the remote deploy's command line, its progress prefixed
// with the host, the parts' states and host keys joined, status and
// down run on each host, and a remote failure's own text.
func TestRemoteUpStatusDown(t *testing.T) {
	dir := t.TempDir()
	runDir, remoteDir := filepath.Join(dir, "run"), filepath.Join(dir, "remote")
	log := filepath.Join(dir, "ssh.log")
	ssh, hinic := filepath.Join(dir, "fake-ssh"), filepath.Join(dir, "fake-hinic")
	// The stand-in ssh logs its arguments and runs the last, the remote
	// command, with sh, as sshd runs it with the user's shell.
	standIn(t, ssh, `echo "$*" >>`+log+`
while [ $# -gt 1 ]; do shift; done
exec sh -c "$1"
`)
	// The stand-in hinic: deploy rack SPEC --host H --run-dir R -o json,
	// deploy status --run-dir PART -o json, deploy cpu --run-dir PART -o
	// json, deploy restart WHAT --run-dir PART ..., deploy down --run-dir
	// PART.
	standIn(t, hinic, `set -e
case "$2" in
rack)
	part=$7/$5
	echo "[  0.1s] fabric: started" >&2
	if [ -e $part/fail ]; then echo "[  0.2s] guest vm-$5: booting" >&2; echo "hinic: deploy: guest vm-$5: no SSH in 15m0s" >&2; exit 1; fi
	echo "[192.0.2.9]:22 ssh-ed25519 AAAA-$5" > $part/known_hosts
	cat $part/fake-state.json ;;
status) cat $4/fake-status.json ;;
cpu) [ -e $4/fake-cpu.json ] && cat $4/fake-cpu.json ;;
restart)
	if [ -e $5/fail ]; then echo "hinic: deploy: the rack is down" >&2; exit 1; fi
	echo "$3: restarted" >&2
	[ ! -e $5/fake-restart.json ] || cat $5/fake-restart.json ;;
down) echo "vm: stopped" >&2; touch $4/down-ran ;;
esac
`)
	t.Setenv(EnvSSH, ssh)
	spec := fmt.Sprintf(`name: rr
hosts:
  - {name: a, address: 192.0.2.1, ssh: "root@192.0.2.1:2201", hinic: %[1]s, run-dir: %[2]s}
  - {name: b, address: 192.0.2.2, ssh: "192.0.2.2", hinic: %[1]s, run-dir: %[2]s}
switches: [{name: sw-a, host: a}, {name: sw-b, host: b}]
links: [{a: "sw-a:10", b: "sw-b:10", vni: 5700}]
guests: [{name: vm-a, nic: hicain, switch: sw-a}, {name: vm-b, nic: hicain, switch: sw-b}]
`, hinic, remoteDir)
	r, err := ParseRack([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = runDir
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	// What each host's part reports: its guest, not ready, so that no
	// mesh is attempted (the guests are not there).
	for _, h := range []string{"a", "b"} {
		part := filepath.Join(remoteDir, h)
		if err := os.MkdirAll(part, 0o700); err != nil {
			t.Fatal(err)
		}
		sub := r.HostRack(h)
		g := sub.Guests[0]
		ps := &State{Rack: *sub, Guests: []GuestState{{Name: g.Name, PID: 4242, SSHAddr: r.host(h).Address + ":2222", DataIP: g.IP,
			NIC: g.NIC, Link: g.Link, Dir: filepath.Join(part, g.Name), RDMADev: "hicain0"}}}
		rs := RackStatus{Name: "rr", RunDir: part, Fabric: "running", Device: "running",
			Guests: []GuestStatus{{Name: g.Name, State: "running", PortState: "ACTIVE", SSH: ps.Guests[0].SSHAddr}}}
		for f, v := range map[string]any{"fake-state.json": ps, "fake-status.json": rs} {
			b, _ := json.Marshal(v)
			if err := os.WriteFile(filepath.Join(part, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The hosts' parts report progress from their own goroutines.
	var mu sync.Mutex
	var lines []string
	progress := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, a...))
	}
	st, err := Up(context.Background(), r, UpOptions{Progress: progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(lines, "\n"))
	}
	for _, want := range []string{"a: fabric: started", "b: fabric: started", "b: deploying over ssh 192.0.2.2 in " + filepath.Join(remoteDir, "b")} {
		if !slices.Contains(lines, want) {
			t.Errorf("progress has no %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	wantCall := fmt.Sprintf("-o BatchMode=yes -o ConnectTimeout=30 -p 2201 root@192.0.2.1 %s deploy rack %s/a/rack.yaml --host a --run-dir %s -o json", hinic, remoteDir, remoteDir)
	if !strings.Contains(string(calls), wantCall+"\n") {
		t.Errorf("ssh calls lack %q:\n%s", wantCall, calls)
	}
	// Both parts have the rack's key pair and the rack's spec.
	key, _ := os.ReadFile(filepath.Join(runDir, FileKey))
	for _, h := range []string{"a", "b"} {
		part := filepath.Join(remoteDir, h)
		got, err := os.ReadFile(filepath.Join(part, FileKey))
		if err != nil || string(got) != string(key) || len(key) == 0 {
			t.Errorf("host %s: key %q, %v", h, got, err)
		}
		if fi, err := os.Stat(filepath.Join(part, FileKey)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("host %s: key file %v, %v", h, fi.Mode(), err)
		}
		if _, err := os.Stat(filepath.Join(part, FileKey+".pub")); err != nil {
			t.Error(err)
		}
		rr, err := ReadRack(filepath.Join(part, FileRemoteSpec))
		if err != nil || rr.Name != "rr" || len(rr.Hosts) != 2 {
			t.Errorf("host %s: the copied spec: %v", h, err)
		}
	}
	// The joined state: both guests with their hosts' SSH addresses,
	// both hosts' parts at their remote run directories, the host keys.
	if len(st.Guests) != 2 || st.Guests[1].SSHAddr != "192.0.2.2:2222" || st.Guests[1].PID != 4242 || st.Guests[1].Netns != "" {
		t.Errorf("guests %+v", st.Guests)
	}
	if len(st.Hosts) != 2 || st.Hosts[1].RunDir != filepath.Join(remoteDir, "b") || st.Hosts[1].SSH != "192.0.2.2" {
		t.Errorf("hosts %+v", st.Hosts)
	}
	known, _ := os.ReadFile(filepath.Join(runDir, FileKnownHosts))
	if string(known) != "[192.0.2.9]:22 ssh-ed25519 AAAA-a\n[192.0.2.9]:22 ssh-ed25519 AAAA-b\n" {
		t.Errorf("known_hosts %q", known)
	}
	if _, err := os.Stat(filepath.Join(runDir, "b")); err == nil {
		t.Error("an ssh host's part made a directory here")
	}
	// The CPU meter: each ssh host's part read by its own hinic (deploy
	// cpu), its daemons named after it; a host whose hinic fails is
	// left out.
	if err := os.WriteFile(filepath.Join(remoteDir, "b", "fake-cpu.json"), []byte(`{"backend": 1.5, "qemu:vm-b": 7.25}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := st.CPUSeconds(); !maps.Equal(c, map[string]float64{"backend@b": 1.5, "qemu:vm-b": 7.25}) {
		t.Errorf("CPU across the hosts: %v", c)
	}
	if calls, _ := os.ReadFile(log); !strings.Contains(string(calls), "deploy cpu --run-dir "+filepath.Join(remoteDir, "b")+" -o json") {
		t.Errorf("no deploy cpu over ssh:\n%s", calls)
	}

	rs, err := Status(context.Background(), runDir)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Fabric != "running" || rs.Device != "running" || len(rs.Hosts) != 2 || len(rs.Guests) != 2 ||
		rs.Guests[1].Name != "vm-b" || rs.Guests[1].PortState != "ACTIVE" || rs.Hosts[1].Part.RunDir != filepath.Join(remoteDir, "b") {
		t.Errorf("status %+v", rs)
	}

	// A host that does not answer: its guests are unknown, with ssh's
	// error.
	t.Setenv(EnvSSH, filepath.Join(dir, "no-such-ssh"))
	rs, err = Status(context.Background(), runDir)
	if err != nil {
		t.Fatal(err)
	}
	if g := rs.Guests[0]; g.State != "unknown" || !strings.Contains(g.Error, "host a") {
		t.Errorf("status without ssh: %+v", g)
	}
	t.Setenv(EnvSSH, ssh)

	// restart: the whole rack is refused, naming --host; one host's
	// part restarts on its machine, with --kill and --hinic passed on.
	if _, err := Restart(context.Background(), runDir, "device", RestartOptions{}); err == nil ||
		!strings.Contains(err.Error(), "spans hosts; restart one host's part with --host (a, b)") {
		t.Errorf("restart: %v", err)
	}
	// The part's state after it (deploy restart -o json): vm-b on a new
	// function, which the rack's state takes.
	ps := State{Guests: []GuestState{{Name: "vm-b", PID: 4242, RDMADev: "rocep0s6", DataNIC: "ens6", HicainGen: 1}}}
	if b, err := json.Marshal(&ps); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(remoteDir, "b", "fake-restart.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	lines = nil
	st, err = RestartPart(context.Background(), runDir, "b", "device", RestartOptions{Kill: true, Hinic: "/opt/hinic", Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if calls, _ := os.ReadFile(log); !strings.Contains(string(calls), "192.0.2.2 "+hinic+" deploy restart device --run-dir "+filepath.Join(remoteDir, "b")+" -o json --kill --hinic /opt/hinic\n") {
		t.Errorf("restart's ssh call:\n%s", calls)
	}
	saved, err := ReadState(runDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*State{st, saved} {
		if g := s.Guests[1]; g.RDMADev != "rocep0s6" || g.DataNIC != "ens6" || g.HicainGen != 1 || s.Guests[0].RDMADev != "hicain0" {
			t.Errorf("the rack's guests after restart: %+v", s.Guests)
		}
	}
	if !slices.Contains(lines, "b: device: restarted") || !slices.Contains(lines, "host b: restarting its device over ssh 192.0.2.2") {
		t.Errorf("restart's progress: %q", lines)
	}
	for _, c := range []struct{ host, what, want string }{
		{"c", "device", `no host "c" (its hosts: a, b)`},
		{"b", "qemu", `restart what? fabric, device, hilink, not "qemu"`},
	} {
		if _, err := RestartPart(context.Background(), runDir, c.host, c.what, RestartOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("restart %s on %s: %v", c.what, c.host, err)
		}
	}
	// A remote failure comes back with the remote hinic's own text.
	if err := os.WriteFile(filepath.Join(remoteDir, "a", "fail"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RestartPart(context.Background(), runDir, "a", "fabric", RestartOptions{}); err == nil ||
		!strings.Contains(err.Error(), "hinic: deploy: the rack is down") {
		t.Errorf("a failed remote restart: %v", err)
	}
	os.Remove(filepath.Join(remoteDir, "a", "fail"))

	lines = nil
	if err := Down(runDir, progress); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a", "b"} {
		if _, err := os.Stat(filepath.Join(remoteDir, h, "down-ran")); err != nil {
			t.Errorf("host %s: down did not run there: %v", h, err)
		}
		if !slices.Contains(lines, h+": vm: stopped") {
			t.Errorf("down's progress: %q", lines)
		}
	}

	// A part that fails reports the remote's own error.
	if err := os.WriteFile(filepath.Join(remoteDir, "b", "fail"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Up(context.Background(), r, UpOptions{})
	if err == nil || !strings.Contains(err.Error(), "host b (ssh 192.0.2.2)") || !strings.Contains(err.Error(), "hinic: deploy: guest vm-b: no SSH in 15m0s") ||
		strings.Contains(err.Error(), "booting") {
		t.Errorf("a failing part: %v", err)
	}
}

// FuzzParseSSHDest: any hosts[].ssh value either is refused or takes
// apart into a user and a host that ssh cannot read as an option and
// the shell reads as one word each, and a port in range; put back
// together it parses to the same.
func FuzzParseSSHDest(f *testing.F) {
	for _, s := range []string{"b", "root@192.0.2.2:2522", "u@[2001:db8::2]:22", "2001:db8::2", "-oProxyCommand=x",
		"a@b@c", "b:0", "[::1", "x@", "b;id"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseSSHDest(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(d.Host, "-") || strings.HasPrefix(d.User, "-") || d.Host == "" ||
			shellQuote(d.Host) != d.Host || shellQuote(d.User) != d.User && d.User != "" {
			t.Fatalf("%q: %+v", s, d)
		}
		if d.Port < 0 || d.Port > 65535 {
			t.Fatalf("%q: port %d", s, d.Port)
		}
		back := d.Host
		if strings.Contains(back, ":") {
			back = "[" + back + "]"
		}
		if d.Port != 0 {
			back += fmt.Sprintf(":%d", d.Port)
		} else if strings.Contains(d.Host, ":") {
			back = d.Host
		}
		if d.User != "" {
			back = d.User + "@" + back
		}
		if d2, err := parseSSHDest(back); err != nil || d2 != d {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, d, back, d2, err)
		}
	})
}
