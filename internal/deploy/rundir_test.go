package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/testutil"
)

// Each case is a run directory another local user could have prepared
// under the shared /tmp; deploy must refuse it before it writes the SSH
// key or a guest's memory there.
func TestUnsafeRunDirsRefused(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "attacker-owned")
	if err := os.Mkdir(target, 0o777); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(string) error{
		"a symlink to a directory of the attacker's": func(p string) error { return os.Symlink(target, p) },
		"writable by others": func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o777)
		},
		"writable by the group": func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o770)
		},
		"a file": func(p string) error { return os.WriteFile(p, nil, 0o600) },
	}
	if os.Geteuid() == 0 {
		cases["owned by another user"] = func(p string) error {
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(base, strings.ReplaceAll(name, " ", "-"))
			if err := prepare(dir); err != nil {
				t.Fatal(err)
			}
			err := ensurePrivateDir(dir)
			if !errors.Is(err, ErrUnsafeRunDir) {
				t.Fatalf("ensurePrivateDir = %v, want ErrUnsafeRunDir", err)
			}
			if _, _, err := EnsureKey(filepath.Join(dir, FileKey)); !errors.Is(err, ErrUnsafeRunDir) {
				t.Errorf("EnsureKey = %v", err)
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("wrote %d files into the attacker's directory", len(ents))
			}
		})
	}
}

func TestUpRefusesUnsafeRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rack")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	boots := 0
	_, err := Up(context.Background(), &Rack{Accel: accel.TCG, RunDir: dir, Image: imageDirWithKernel(t)},
		UpOptions{Hinic: "/nonexistent/hinic", Prober: hungKVM(&boots)})
	if !errors.Is(err, ErrUnsafeRunDir) && !strings.Contains(err.Error(), "missing host tools") {
		t.Fatalf("Up = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileKey)); err == nil {
		t.Error("wrote the SSH key into an unsafe run dir")
	}
	if _, err := ReadState(dir); err == nil {
		t.Error("ReadState read an unsafe run dir")
	}
}

// An older deploy's run dir (0755, files 0644) is narrowed, not refused.
func TestPrivateDirNarrowsOldRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rack")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, FileFabricLog)
	if err := os.WriteFile(log, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if m := testutil.Perm(t, dir); m != 0o700 {
		t.Errorf("run dir mode %04o", m)
	}
	f, err := openPrivate(log, os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if m := testutil.Perm(t, log); m != 0o600 {
		t.Errorf("log mode %04o", m)
	}
	g := filepath.Join(dir, "vm-a")
	if err := os.Mkdir(g, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureGuestDir(g); err != nil || testutil.Perm(t, g) != 0o700 {
		t.Errorf("guest dir: %v, mode %04o", err, testutil.Perm(t, g))
	}
}

func TestOpenPrivateFollowsNoSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, FileState+".tmp")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := writePrivate(link, []byte("overwritten")); err == nil {
		t.Error("wrote through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim now %q", b)
	}
}

func TestEnsureKeyTrustsOnlyAPrivateKey(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, FileKey)
	s1, _, err := EnsureKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if m := testutil.Perm(t, key); m != 0o600 {
		t.Errorf("new key mode %04o", m)
	}
	s2, _, err := EnsureKey(key)
	if err != nil || string(s1.PublicKey().Marshal()) != string(s2.PublicKey().Marshal()) {
		t.Fatalf("the key was not reused: %v", err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EnsureKey(key); !errors.Is(err, ErrUnsafeRunDir) {
		t.Errorf("a readable key was trusted: %v", err)
	}
	// A symlink to somebody else's key is not a key of this rack.
	other := filepath.Join(t.TempDir(), "theirs")
	if err := os.Rename(key, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(other, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EnsureKey(key); !errors.Is(err, ErrUnsafeRunDir) {
		t.Errorf("a symlinked key was trusted: %v", err)
	}
}

// A pid recorded in state.json may belong to another program after a
// reboot: it counts as the rack's only when its executable and its
// arguments are the rack's, not when its command line merely mentions
// "qemu" or "fabric serve". For the hinic backends the executable is
// the very binary the state recorded as having started them.
func TestAliveMatchesTheRacksProcess(t *testing.T) {
	// The fabric's sockets live in the run dir, whose path must fit a
	// socket address: t.TempDir's is too long.
	runDir, err := os.MkdirTemp("", "hr-alive-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	r := &Rack{RunDir: runDir}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(r.RunDir, "vm-a")
	// A bash that sleeps with args in its argv; its executable is bash.
	script := func(args ...string) int { return startArgv(t, "bash", args...) }

	// The rack's real fabric, started as deploy starts it, with this
	// test binary as the hinic binary (TestMain runs the command line
	// under HINIC_DEPLOY_TEST_AS_HINIC=1).
	t.Setenv("HINIC_DEPLOY_TEST_AS_HINIC", "1")
	st := &State{Rack: *r, path: filepath.Join(runDir, FileState)}
	err = startFabric(context.Background(), st, os.Args[0], func(f string, a ...any) { t.Logf(f, a...) })
	t.Cleanup(func() { stop(st.FabricPID, fabricProc(r, st.FabricExe), "fabric", quiet) })
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(runDir, FileFabricLog))
		t.Fatalf("start the fabric: %v\n%s", err, b)
	}
	self, err := resolveExe("")
	if err != nil {
		t.Fatal(err)
	}
	if st.FabricExe != self {
		t.Fatalf("the state records the fabric's binary as %q, want %q", st.FabricExe, self)
	}
	// The recorded binary survives state.json, and a state written
	// before it was recorded still reads.
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadState(runDir); err != nil || got.FabricExe != self {
		t.Fatalf("state.json: fabric binary %+v, %v", got, err)
	}
	old := filepath.Join(t.TempDir(), "old")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, FileState), []byte(`{"rack":{},"fabric_pid":42,"guests":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadState(old); err != nil || got.FabricPID != 42 || got.FabricExe != "" {
		t.Fatalf("an old state.json: %+v, %v", got, err)
	}
	sh, err := resolveExe("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}

	fabArgs := []string{"fabric", "serve", "--config", filepath.Join(r.RunDir, FileFabricConf)}
	for _, tc := range []struct {
		name string
		pid  int
		want proc
		ok   bool
	}{
		{"an editor of qemu.log", script(filepath.Join(dir, "qemu.log"), "qemu"), qemuProc(dir), false},
		{"the args, but not QEMU", script("-pidfile", filepath.Join(dir, "qemu.pid")), qemuProc(dir), false},
		{"another rack's fabric", script("fabric", "serve", "--config", "/tmp/other/fabric.yaml"), fabricProc(r, st.FabricExe), false},
		{"the fabric's args, but bash", script(fabArgs...), fabricProc(r, st.FabricExe), false},
		{"the fabric's args, but bash, old state", script(fabArgs...), fabricProc(r, ""), false},
		{"the device's args, but bash", script("device", "serve", "--control", DeviceControl(r), "--vnic", "x"), deviceProc(r, st.FabricExe), false},
		{"the GPU's args, but bash", script("gpu", "serve", "--control", GPUControl(r)), gpuProc(r, st.FabricExe), false},
		{"split args", script("fabric", "x", "serve", "--config", filepath.Join(r.RunDir, FileFabricConf)), fabricProc(r, st.FabricExe), false},
		{"the real fabric", st.FabricPID, fabricProc(r, st.FabricExe), true},
		// An old state: the binary reading it, which here started it.
		{"the real fabric, old state", st.FabricPID, fabricProc(r, ""), true},
		{"the real fabric, another binary recorded", st.FabricPID, fabricProc(r, sh), false},
		{"the real fabric as the device", st.FabricPID, deviceProc(r, st.FabricExe), false},
		{"no such pid", 1 << 30, fabricProc(r, st.FabricExe), false},
		{"pid 0", 0, fabricProc(r, st.FabricExe), false},
		{"this test", os.Getpid(), fabricProc(r, st.FabricExe), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := alive(tc.pid, tc.want); got != tc.ok {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", tc.pid))
				exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", tc.pid))
				t.Errorf("alive = %v, want %v (cmdline %q, exe %q)", got, tc.ok, b, exe)
			}
		})
	}
}
