package deploy

// On a host whose guests are placed through libvirt and that runs
// systemd, the rack's fabric and device backend run as the host
// package's template units, hinic-fabric@ and hinic-device@
// (packaging/hinic), one instance per run directory: systemd supervises
// and logs them (journalctl -u), as libvirtd does the guests. deploy
// writes the command line it would run itself into RUN-DIR/KIND.env,
// starts the unit and follows its main process as it follows a backend
// of its own: the same pid checks, the same control socket. Anywhere
// else (no systemd, the package not installed, a deploy that is not
// root's, a host that is a network namespace) the backends are deploy's
// own children, as before.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Template units of the host package that run a rack's daemons.
const (
	UnitFabric = "hinic-fabric@"
	UnitDevice = "hinic-device@"
)

// systemdRunning and unitDirs are what says a host runs systemd and has
// the host package's units; tests point them elsewhere.
var (
	systemdRunning = "/run/systemd/system"
	unitDirs       = []string{"/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}
)

// unitName is the instance of template (UnitFabric, UnitDevice) for the
// run directory runDir: TEMPLATE + systemd-escape --path RUN-DIR.
func unitName(template, runDir string) string {
	return template + escapePath(runDir) + ".service"
}

// escapePath is systemd-escape --path: the path without its leading and
// trailing slashes, "/" as "-", and every byte but ASCII letters,
// digits, ':', '_' and a '.' that does not lead as \xNN; "/" is "-".
func escapePath(p string) string {
	p = strings.Trim(filepath.Clean(p), "/")
	if p == "" {
		return "-"
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == ':', c == '_',
			c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// EnvUnitsUnderSystemd makes TestUnitsUnderSystemd run: set on a machine
// whose PID 1 is systemd and that has the hinic package installed, as
// root. TestHostUnits (internal/cli/verify/e2e) runs this test's binary
// in a QEMU guest with the package it built.
const EnvUnitsUnderSystemd = "HINIC_UNITS_UNDER_SYSTEMD"

// useUnits reports whether the rack's daemons run as systemd units: a
// libvirt host that runs systemd and has the host package's units,
// deployed by root (the units run as root, and the run directory must
// be theirs). why says, when not, why not, for a libvirt host.
func (r *Rack) useUnits() (ok bool, why string) {
	if r.libvirt() == "" {
		return false, ""
	}
	if _, err := os.Stat(systemdRunning); err != nil {
		return false, "the host does not run systemd"
	}
	if os.Geteuid() != 0 {
		return false, "the units run as root, and this deploy is not root's"
	}
	if strings.ContainsAny(r.RunDir, " \t\n\\") {
		return false, "the run directory has a space or a backslash, which a unit's command line cannot take"
	}
	for _, t := range []string{UnitFabric, UnitDevice} {
		if !unitInstalled(t + ".service") {
			return false, fmt.Sprintf("%s.service is not installed (the hinic package)", t)
		}
	}
	return true, ""
}

// unitInstalled reports whether a unit file of that name is installed.
func unitInstalled(name string) bool {
	for _, d := range unitDirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

// unitEnv is KIND.env of a unit: the command line after the binary and
// the daemon's GOMAXPROCS.
func unitEnv(d daemon) string {
	s := "# Written by hinic deploy rack for " + d.unit + ".\nHINIC_ARGS=" + strings.Join(d.args, " ") + "\n"
	if d.procs > 0 {
		s += "GOMAXPROCS=" + strconv.Itoa(d.procs) + "\n"
	}
	return s
}

// unitEnvFile is the environment file of template's instance for
// runDir: RUN-DIR/fabric.env or RUN-DIR/device.env.
func unitEnvFile(runDir, template string) string {
	return filepath.Join(runDir, strings.TrimSuffix(strings.TrimPrefix(template, "hinic-"), "@")+".env")
}

// spawnUnit starts d as its template unit's instance for the run
// directory and waits until it is ready, as spawn does for a child. It
// returns the unit's main pid and its binary.
func spawnUnit(ctx context.Context, runDir string, d daemon) (int, string, error) {
	name := unitName(d.unit, runDir)
	if err := writePrivate(unitEnvFile(runDir, d.unit), []byte(unitEnv(d))); err != nil {
		return 0, "", err
	}
	systemctl := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	// A unit that failed before stays failed until reset.
	_, _ = systemctl("reset-failed", name)
	if _, err := systemctl("start", name); err != nil {
		return 0, "", fmt.Errorf("starting the %s: %w (journalctl -u %s)", d.what, err, name)
	}
	out, err := systemctl("show", "--property=MainPID", "--value", name)
	if err != nil {
		return 0, "", err
	}
	pid, _ := strconv.Atoi(out)
	if pid <= 0 {
		return 0, "", fmt.Errorf("the %s: unit %s has no main process (journalctl -u %s)", d.what, name, name)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return pid, "", err
	}
	_ = writePrivate(d.pidPath, []byte(strconv.Itoa(pid)+"\n"))
	deadline := time.Now().Add(15 * time.Second)
	for !d.ready() {
		if !alive(pid, hinicProc(exe, d.args...)) {
			return pid, exe, fmt.Errorf("the %s (unit %s) exited (journalctl -u %s)", d.what, name, name)
		}
		select {
		case <-ctx.Done():
			return pid, exe, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return pid, exe, fmt.Errorf("the %s (unit %s) did not open its control socket in 15 s (journalctl -u %s)", d.what, name, name)
		}
	}
	return pid, exe, nil
}

// stopUnits stops the rack's units, if it ran any; the processes are
// already stopped, and this leaves systemd with no failed instance.
func stopUnits(r *Rack) {
	if ok, _ := r.useUnits(); !ok {
		return
	}
	for _, t := range []string{UnitDevice, UnitFabric} {
		_ = exec.Command("systemctl", "stop", unitName(t, r.RunDir)).Run()
	}
}
