package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEscapePath: unitName's instance is what systemd-escape --path
// makes of the run directory, which the units' %f turns back into it.
func TestEscapePath(t *testing.T) {
	cases := map[string]string{
		"/tmp/hinic-rack-lv":   `tmp-hinic\x2drack\x2dlv`,
		"/":                    "-",
		"/var/lib/hn/a.b/c_d:": `var-lib-hn-a.b-c_d:`,
		"/tmp/.x/ä":            `tmp-.x-\xc3\xa4`,
		".x/y":                 `\x2ex-y`,
		"/tmp//x/":             "tmp-x",
	}
	se, err := exec.LookPath("systemd-escape")
	for in, want := range cases {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
		if err != nil {
			continue
		}
		out, err := exec.Command(se, "--path", in).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != escapePath(in) {
			t.Errorf("systemd-escape --path %q = %q, escapePath %q", in, got, escapePath(in))
		}
	}
	if err != nil {
		t.Logf("systemd-escape not installed: compared with the expected names only")
	}
	if got := unitName(UnitDevice, "/tmp/hn-lv"); got != `hinic-device@tmp-hn\x2dlv.service` {
		t.Errorf("unitName: %s", got)
	}
}

// TestUseUnits: units only on a libvirt host that runs systemd, has the
// package's units and is deployed by root.
func TestUseUnits(t *testing.T) {
	sys, units := t.TempDir(), t.TempDir()
	oldRun, oldDirs := systemdRunning, unitDirs
	t.Cleanup(func() { systemdRunning, unitDirs = oldRun, oldDirs })
	systemdRunning, unitDirs = filepath.Join(sys, "absent"), []string{units}
	r := &Rack{Name: "lv", RunDir: "/tmp/hn-lv", Hosts: []Host{{Name: "h1", Address: "127.0.0.1", Libvirt: "qemu:///system"}}}
	if ok, why := r.useUnits(); ok || !strings.Contains(why, "does not run systemd") {
		t.Errorf("no systemd: %v %q", ok, why)
	}
	systemdRunning = sys
	if ok, why := r.useUnits(); ok || (os.Geteuid() == 0 && !strings.Contains(why, "not installed")) {
		t.Errorf("no units: %v %q", ok, why)
	}
	for _, u := range []string{UnitFabric, UnitDevice} {
		if err := os.WriteFile(filepath.Join(units, u+".service"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok, why := r.useUnits()
	if want := os.Geteuid() == 0; ok != want {
		t.Errorf("installed: %v %q, want %v", ok, why, want)
	}
	if ok, _ := (&Rack{RunDir: "/tmp/x"}).useUnits(); ok {
		t.Error("a rack without libvirt runs units")
	}
	r.RunDir = "/tmp/a b"
	if ok, why := r.useUnits(); ok || (os.Geteuid() == 0 && !strings.Contains(why, "space")) {
		t.Errorf("run dir with a space: %v %q", ok, why)
	}
}

// TestSpawnUnit runs spawnUnit against a stand-in systemctl that starts
// the unit's command line from the env file deploy wrote, as the
// packaged unit's ExecStart=/usr/bin/hinic $HINIC_ARGS does, and checks
// the file, the commands and the pid deploy then follows.
func TestSpawnUnit(t *testing.T) {
	bin, state, runDir := t.TempDir(), t.TempDir(), t.TempDir()
	fake := `#!/bin/sh
echo "$*" >> ` + state + `/calls
case "$1" in
reset-failed|stop) exit 0 ;;
start)
	# EnvironmentFile= takes a value up to the end of its line.
	HINIC_ARGS=$(sed -n 's/^HINIC_ARGS=//p' ` + runDir + `/device.env)
	export GOMAXPROCS=$(sed -n 's/^GOMAXPROCS=//p' ` + runDir + `/device.env)
	/bin/sh $HINIC_ARGS </dev/null >/dev/null 2>&1 &
	# Type=exec: start returns once the command runs.
	for i in $(seq 500); do grep -q daemon.sh /proc/$!/cmdline 2>/dev/null && break; sleep 0.01; done
	echo $! > ` + state + `/pid ;;
show) cat ` + state + `/pid ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	ready := filepath.Join(runDir, "ready")
	script := filepath.Join(runDir, "daemon.sh")
	if err := os.WriteFile(script, []byte(`echo "$GOMAXPROCS" > `+ready+`; sleep 30`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := daemon{what: "device backend", unit: UnitDevice, args: []string{script, "--control", "x"}, procs: 2,
		logPath: filepath.Join(runDir, "device.log"), pidPath: filepath.Join(runDir, "device.pid"),
		ready: func() bool { b, err := os.ReadFile(ready); return err == nil && len(b) > 0 }}
	pid, exe, err := spawnUnit(context.Background(), runDir, d)
	if pid > 0 {
		defer syscall.Kill(pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(filepath.Join(runDir, "device.env"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "\nHINIC_ARGS="+script+" --control x\n") || !strings.Contains(string(env), "\nGOMAXPROCS=2\n") {
		t.Errorf("device.env:\n%s", env)
	}
	if b, _ := os.ReadFile(ready); strings.TrimSpace(string(b)) != "2" {
		t.Errorf("the unit's process ran with GOMAXPROCS %q", b)
	}
	calls, _ := os.ReadFile(filepath.Join(state, "calls"))
	name := unitName(UnitDevice, runDir)
	for _, want := range []string{"reset-failed " + name, "start " + name, "show --property=MainPID --value " + name} {
		if !strings.Contains(string(calls), want+"\n") {
			t.Errorf("systemctl calls lack %q:\n%s", want, calls)
		}
	}
	if !alive(pid, hinicProc(exe, d.args...)) {
		t.Errorf("pid %d (%s) is not the unit's process", pid, exe)
	}
	if b, _ := os.ReadFile(d.pidPath); strings.TrimSpace(string(b)) == "" {
		t.Error("no pid file")
	}
}

// TestUnitFiles has systemd-analyze verify the host package's template
// units, instantiated for a run directory as deploy starts them, with
// ExecStart pointed at an executable (systemd checks it), and checks
// that they read deploy's env file and run its command line.
func TestUnitFiles(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd): the units are not verified")
	}
	dir := t.TempDir()
	runDir := filepath.Join(t.TempDir(), "hinic-rack-x")
	for _, tc := range []struct{ template, env string }{{UnitFabric, "fabric.env"}, {UnitDevice, "device.env"}} {
		b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "hinic", tc.template+".service"))
		if err != nil {
			t.Fatal(err)
		}
		unit := string(b)
		for _, want := range []string{"\nEnvironmentFile=%f/" + tc.env + "\n", "\nExecStart=/usr/bin/hinic $HINIC_ARGS\n",
			"\nReadWritePaths=%f\n", "\nProtectSystem=strict\n", "\nNoNewPrivileges=yes\n"} {
			if !strings.Contains(unit, want) {
				t.Errorf("%s lacks %q", tc.template, strings.TrimSpace(want))
			}
		}
		p := filepath.Join(dir, unitName(tc.template, runDir))
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(unit, "/usr/bin/hinic", "/bin/true")), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sa, "verify", "--man=no", p).CombinedOutput()
		// Lines about the host (no running systemd, units it orders
		// after) are not the unit's; every line naming it is.
		var bad []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, tc.template) {
				bad = append(bad, l)
			}
		}
		if err != nil || len(bad) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(p), err, out)
		}
	}
}
