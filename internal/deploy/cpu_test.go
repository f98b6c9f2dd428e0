package deploy

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a ')' in it, utime 250, stime 50.
	line := "4242 (qemu) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 3 0 100 1000 100"
	got, err := parseStatCPU(line)
	if err != nil || got != 3.0 {
		t.Fatalf("got %v, %v; want 3 s", got, err)
	}
	for _, bad := range []string{"", "4242 qemu S 1", "4242 (q) S 1 2 3", "4242 (q) S 1 1 1 0 -1 0 0 0 0 0 x 50 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestCPUSeconds meters a real process that burns CPU, as the rack's
// fabric, and leaves out a pid that is not the rack's.
func TestCPUSeconds(t *testing.T) {
	dir := t.TempDir()
	r := Rack{Name: "cpu", RunDir: dir}
	// A process whose arguments are the fabric's: sh -c LOOP with the
	// fabric's arguments as $0 and positional parameters. The state
	// records sh as the binary that started it, as deploy records hinic.
	sh, err := resolveExe("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	fab := fabricProc(&r, sh)
	args := append([]string{"-c", `end=$(( $(date +%s) + 30 )); while [ $(date +%s) -lt $end ]; do :; done`}, fab.args...)
	cmd := exec.Command(sh, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns once the child called execve, which can be before
	// the kernel set up its new argv: /proc/PID/cmdline is empty for
	// that moment, so wait for it.
	for start := time.Now(); !alive(cmd.Process.Pid, fab); {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the process never showed the fabric's arguments")
		}
		time.Sleep(time.Millisecond)
	}
	st := &State{Rack: r, FabricPID: cmd.Process.Pid, FabricExe: sh, Guests: []GuestState{{Name: "vm-a", PID: os.Getpid()}}}
	first := st.CPUSeconds()
	if _, ok := first["fabric"]; !ok {
		t.Fatalf("no fabric in %v", first)
	}
	if _, ok := first["qemu:vm-a"]; ok {
		t.Errorf("the test process counted as vm-a's QEMU: %v", first)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		now := st.CPUSeconds()
		if now["fabric"] > first["fabric"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fabric CPU did not grow: %v then %v", first, now)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := st.CPUSeconds(); len(got) != 0 {
		t.Errorf("a dead fabric still metered: %v", got)
	}
}
