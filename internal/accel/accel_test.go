package accel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The consoles of testdata/ are real: Debian's 6.1.0-57 kernel booted by
// BootKernel's command line under TCG (it reaches the root-mount panic),
// and the same under -accel kvm on a host with kvm-pvm and no VMX/SVM
// (only the real-mode loader's line, then nothing until the timeout).
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClassify(t *testing.T) {
	tcg := readFixture(t, "console-tcg.txt")
	pvm := readFixture(t, "console-kvm-pvm.txt")
	banner := tcg[:strings.Index(string(tcg), "\n[    0.000000] Command line")]
	for _, tc := range []struct {
		name string
		b    Boot
		ok   bool
		want string
	}{
		{"booted", Boot{Console: tcg, Exited: true, Elapsed: 1500 * time.Millisecond}, true, "booted under KVM in 1.5 s"},
		{"empty console, hung", Boot{Elapsed: 20 * time.Second}, false, "printed nothing in 20s"},
		{"blank lines only", Boot{Console: []byte("\r\n\n"), Elapsed: 20 * time.Second}, false, "printed nothing"},
		{"loader only (kvm-pvm)", Boot{Console: pvm, Elapsed: 20 * time.Second}, false, `never started (its loader printed "Probing EDD (edd=off to disable)... ok")`},
		{"QEMU refused KVM", Boot{Stderr: []byte("qemu-system-x86_64: -accel kvm: Could not access KVM kernel module: Permission denied\n"),
			Exited: true, Err: errors.New("exit status 1")}, false, "QEMU could not run a guest under -accel kvm: qemu-system-x86_64: -accel kvm: Could not access KVM kernel module"},
		{"QEMU died silently", Boot{Exited: true, Err: errors.New("signal: killed")}, false, "signal: killed"},
		{"banner, then hung", Boot{Console: banner, Elapsed: 20 * time.Second}, false, "did not finish booting in 20s"},
		{"banner, then exited", Boot{Console: banner, Exited: true}, false, "stopped under -accel kvm before it finished"},
		{"a panic but no banner", Boot{Console: []byte("Kernel panic - not syncing: x\n"), Exited: true}, false, "never started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := Classify(tc.b, 20*time.Second)
			if ok != tc.ok || !strings.Contains(reason, tc.want) {
				t.Errorf("Classify = %v, %q; want %v, containing %q", ok, reason, tc.ok, tc.want)
			}
		})
	}
}

// fakeHost is a Prober whose host facts and probe boot are scripted.
type fakeHost struct {
	facts HostFacts
	boot  Boot
	boots atomic.Int32
}

func (f *fakeHost) prober(t *testing.T, cache string) *Prober {
	return &Prober{
		QEMU: os.Args[0], CacheDir: cache, Timeout: 20 * time.Second,
		ReadHost: func(string) HostFacts { return f.facts },
		BootProbe: func(context.Context, string, string, time.Duration) Boot {
			f.boots.Add(1)
			return f.boot
		},
	}
}

func kernelFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var pvmHost = HostFacts{DevKVM: "ok", CPUVirt: "none", Modules: []string{"kvm", "kvm_pvm"}, HostKernel: "6.18", BootID: "b1"}

func TestOpenDevKVMAloneNeverMeansKVM(t *testing.T) {
	// /dev/kvm opens on each of these hosts, and QEMU starts; only the
	// console tells whether the kernel ran.
	for _, tc := range []struct {
		name string
		host HostFacts
		boot Boot
	}{
		{"kvm-pvm, no VMX, empty console", pvmHost, Boot{Elapsed: 20 * time.Second}},
		{"kvm-pvm, loader line only", pvmHost, Boot{Console: []byte("Probing EDD (edd=off to disable)... ok\r\n"), Elapsed: 20 * time.Second}},
		{"VMX and kvm_intel, but the guest hangs", HostFacts{DevKVM: "ok", CPUVirt: "vmx", Modules: []string{"kvm", "kvm_intel"}}, Boot{Elapsed: 20 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeHost{facts: tc.host, boot: tc.boot}
			p := f.prober(t, t.TempDir())
			kernel := kernelFile(t, "k")
			accel, why, err := p.Choose(context.Background(), Auto, kernel)
			if err != nil || accel != TCG {
				t.Fatalf("auto = %q, %v; want tcg", accel, err)
			}
			if !strings.HasPrefix(why, "TCG: ") || !strings.Contains(why, tc.host.Summary()) {
				t.Errorf("why = %q", why)
			}
			if f.boots.Load() != 1 {
				t.Errorf("%d probe boots, want 1", f.boots.Load())
			}
			// accel: kvm is refused at once, with the fix.
			_, _, err = p.Choose(context.Background(), KVM, kernel)
			if err == nil || !strings.Contains(err.Error(), "use accel: tcg or auto") {
				t.Errorf("kvm: err = %v", err)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	booted := Boot{Console: readFixture(t, "console-tcg.txt"), Exited: true, Elapsed: time.Second}
	kvmHost := HostFacts{DevKVM: "ok", CPUVirt: "vmx", Modules: []string{"kvm", "kvm_intel"}, BootID: "b1"}
	kernel := kernelFile(t, "k")
	ctx := context.Background()

	t.Run("tcg never probes", func(t *testing.T) {
		f := &fakeHost{facts: kvmHost, boot: booted}
		accel, _, err := f.prober(t, t.TempDir()).Choose(ctx, TCG, kernel)
		if err != nil || accel != TCG || f.boots.Load() != 0 {
			t.Errorf("tcg = %q, %v, %d boots", accel, err, f.boots.Load())
		}
	})
	t.Run("auto and kvm take a working KVM", func(t *testing.T) {
		f := &fakeHost{facts: kvmHost, boot: booted}
		p := f.prober(t, t.TempDir())
		for _, spec := range []string{Auto, KVM} {
			accel, why, err := p.Choose(ctx, spec, kernel)
			if err != nil || accel != KVM || !strings.HasPrefix(why, "KVM: ") {
				t.Errorf("%s = %q, %q, %v", spec, accel, why, err)
			}
		}
		if f.boots.Load() != 1 {
			t.Errorf("%d probe boots, want 1 (the second answer is cached)", f.boots.Load())
		}
	})
	t.Run("no /dev/kvm: no probe boot", func(t *testing.T) {
		f := &fakeHost{facts: HostFacts{DevKVM: "open /dev/kvm: no such file or directory", CPUVirt: "vmx"}, boot: booted}
		p := f.prober(t, t.TempDir())
		accel, why, err := p.Choose(ctx, Auto, kernel)
		if err != nil || accel != TCG || !strings.Contains(why, "no such file") || f.boots.Load() != 0 {
			t.Errorf("auto = %q, %q, %v, %d boots", accel, why, err, f.boots.Load())
		}
		if _, _, err := p.Choose(ctx, KVM, kernel); err == nil || !strings.Contains(err.Error(), "/dev/kvm") {
			t.Errorf("kvm: err = %v", err)
		}
	})
	t.Run("the probe cannot run", func(t *testing.T) {
		f := &fakeHost{facts: kvmHost, boot: booted}
		p := f.prober(t, t.TempDir())
		missing := filepath.Join(t.TempDir(), "no-kernel")
		accel, why, err := p.Choose(ctx, Auto, missing)
		if err != nil || accel != TCG || !strings.Contains(why, "could not run") {
			t.Errorf("auto = %q, %q, %v", accel, why, err)
		}
		if _, _, err := p.Choose(ctx, KVM, missing); err == nil {
			t.Error("kvm with no kernel: no error")
		}
		p.QEMU = "no-such-qemu-binary"
		if _, _, err := p.Choose(ctx, KVM, kernel); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("kvm with no QEMU: err = %v", err)
		}
	})
	t.Run("bad spec", func(t *testing.T) {
		f := &fakeHost{facts: kvmHost, boot: booted}
		if _, _, err := f.prober(t, t.TempDir()).Choose(ctx, "hvf", kernel); err == nil || !strings.Contains(err.Error(), "want tcg, kvm or auto") {
			t.Errorf("err = %v", err)
		}
		for _, s := range []string{TCG, KVM, Auto} {
			if !Valid(s) {
				t.Errorf("Valid(%q) = false", s)
			}
		}
		if Valid("kvm:tcg") || Valid("") {
			t.Error("Valid takes kvm:tcg or empty")
		}
	})
}

func TestCacheKeyedByHostAndKernel(t *testing.T) {
	hung := Boot{Elapsed: 20 * time.Second}
	cache := filepath.Join(t.TempDir(), "kvm-probe")
	ctx := context.Background()
	k1, k2 := kernelFile(t, "kernel one"), kernelFile(t, "kernel two")
	f := &fakeHost{facts: pvmHost, boot: hung}
	p := f.prober(t, cache)
	probe := func(kernel string) *Verdict {
		t.Helper()
		v, err := p.Probe(ctx, kernel)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := probe(k1); v.Cached || v.KVM {
		t.Fatalf("first probe: %+v", v)
	}
	if v := probe(k1); !v.Cached || v.KVM || f.boots.Load() != 1 {
		t.Fatalf("second probe: cached %v, %d boots", v.Cached, f.boots.Load())
	}
	probe(k2) // another kernel
	if f.boots.Load() != 2 {
		t.Errorf("another kernel: %d boots, want 2", f.boots.Load())
	}
	f.facts.BootID = "b2" // the host rebooted
	probe(k1)
	f.facts.Modules = []string{"kvm", "kvm_intel"} // another KVM module
	probe(k1)
	if f.boots.Load() != 4 {
		t.Errorf("after a reboot and a module change: %d boots, want 4", f.boots.Load())
	}
	p.NoCache = true
	if v := probe(k1); v.Cached || f.boots.Load() != 5 {
		t.Errorf("NoCache: cached %v, %d boots", v.Cached, f.boots.Load())
	}
	// A corrupt or foreign cached file is probed again.
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if err := os.WriteFile(filepath.Join(cache, e.Name()), []byte(`{"version": 99, "kvm": true, "reason": "x"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.NoCache = false
	if v := probe(k1); v.Cached || v.KVM {
		t.Errorf("stale cache trusted: %+v", v)
	}
	if st, err := os.Stat(cache); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("cache directory: %v, %v; want mode 0700", st, err)
	}
}

func TestCPUVirt(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ cpuinfo, want string }{
		{"processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor lahf_lm\n", "none"},
		{"processor\t: 0\nflags\t\t: fpu vmx ept\n", "vmx"},
		{"processor\t: 0\nflags\t\t: fpu svm npt\n", "svm"},
		{"model name\t: vmx-like name\n", "none"},
	} {
		p := filepath.Join(dir, "cpuinfo")
		if err := os.WriteFile(p, []byte(tc.cpuinfo), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := cpuVirt(p); got != tc.want {
			t.Errorf("cpuVirt(%q) = %q, want %q", tc.cpuinfo, got, tc.want)
		}
	}
}
