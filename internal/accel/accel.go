// Package accel decides which QEMU accelerator HiNIC's guests run under.
//
// An open /dev/kvm does not mean that KVM can run a stock guest kernel: a
// host with the kvm-pvm module and no VMX/SVM opens /dev/kvm and QEMU
// initialises KVM, yet a stock Debian kernel never prints a byte, and
// QEMU's own kvm:tcg fallback never triggers because KVM did initialise.
// So KVM is chosen only after a probe guest proved it: the guest kernel
// that the rack will boot, booted once under -accel kvm with no root file
// system, must print its banner and reach the root-mount panic. The
// verdict is cached per host (boot, host kernel, KVM modules, QEMU) and
// guest kernel (its sha256), so the probe costs its seconds once.
//
// accel imports only image (a file's sha256) and childproc (the probe's
// QEMU dies with its parent); deploy and the doctor use it.
// A Prober is safe for concurrent use.
package accel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/childproc"
	"github.com/PacketFive/hinic/internal/image"
)

// The accelerators of a rack spec's accel.
const (
	TCG  = "tcg"
	KVM  = "kvm"
	Auto = "auto" // KVM when the probe passes, TCG otherwise
)

// Valid reports whether spec is an accel a rack spec may name.
func Valid(spec string) bool { return spec == TCG || spec == KVM || spec == Auto }

// DefaultTimeout bounds one probe boot. A stock 6.1 kernel reaches its
// root-mount panic in about a second under KVM and in about five under
// TCG on a two-core host, so twenty seconds is ample for a working KVM.
const DefaultTimeout = 20 * time.Second

// cacheVersion changes whenever the probe's method or its verdict's
// meaning changes, so that older cached verdicts are not trusted.
const cacheVersion = 1

// HostFacts are what the host says about KVM. They are reported, and they
// key the cache, but none of them alone ever means that KVM works.
type HostFacts struct {
	DevKVM     string   `json:"dev_kvm"`     // "ok", or why /dev/kvm does not open read-write
	CPUVirt    string   `json:"cpu_virt"`    // "vmx", "svm", or "none" (the CPU flags of /proc/cpuinfo)
	Modules    []string `json:"kvm_modules"` // loaded KVM modules (/sys/module/kvm*), e.g. kvm, kvm_intel, kvm_pvm
	HostKernel string   `json:"host_kernel"` // uname -r
	BootID     string   `json:"-"`           // this boot of the host
	QEMU       string   `json:"qemu"`        // the QEMU binary and its size and mtime
}

// Summary is the facts in one phrase, for a reason line.
func (h HostFacts) Summary() string {
	mods := "no KVM module"
	if len(h.Modules) > 0 {
		mods = "modules " + strings.Join(h.Modules, ",")
	}
	virt := "no VMX/SVM"
	if h.CPUVirt != "none" && h.CPUVirt != "" {
		virt = strings.ToUpper(h.CPUVirt)
	}
	return virt + ", " + mods
}

// Verdict is the probe's result for one guest kernel on this host.
type Verdict struct {
	KVM          bool      `json:"kvm"`    // KVM booted the kernel
	Reason       string    `json:"reason"` // why, in one line
	Kernel       string    `json:"kernel"` // the guest kernel probed
	KernelSHA256 string    `json:"kernel_sha256"`
	Host         HostFacts `json:"host"`
	Console      string    `json:"console_tail,omitempty"` // the probe guest's last console lines
	Seconds      float64   `json:"seconds"`                // how long the probe boot took
	Checked      time.Time `json:"checked"`
	Cached       bool      `json:"cached"` // read from the cache, not probed now
	Version      int       `json:"version"`
}

// Boot is what one probe boot showed.
type Boot struct {
	Console []byte        // the serial console
	Stderr  []byte        // QEMU's own messages
	Exited  bool          // QEMU exited before the timeout
	Err     error         // QEMU's exit error, or the failure to start it
	Elapsed time.Duration // start to exit or timeout
}

// Prober runs and caches probes. The zero value probes with
// qemu-system-x86_64 from PATH, DefaultTimeout, and the cache in the
// user's cache directory.
type Prober struct {
	QEMU     string        // QEMU binary (default qemu-system-x86_64 from PATH)
	CacheDir string        // verdicts (default $XDG_CACHE_HOME/hinic/kvm-probe)
	NoCache  bool          // probe again and write no verdict
	Timeout  time.Duration // one probe boot (default DefaultTimeout)

	// ReadHost and BootProbe replace reading the host's facts and the
	// probe boot (default BootKernel); tests of the decision script them.
	ReadHost  func(qemu string) HostFacts
	BootProbe func(ctx context.Context, qemu, kernel string, timeout time.Duration) Boot
}

// Probe returns the verdict for booting kernel under KVM on this host. It
// boots the probe guest only when /dev/kvm opens and no cached verdict
// answers. An error means that the probe could not run at all (no QEMU,
// no readable kernel); a failing KVM is a verdict, not an error.
func (p *Prober) Probe(ctx context.Context, kernel string) (*Verdict, error) {
	qemu := p.QEMU
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	qpath, err := exec.LookPath(qemu)
	if err != nil {
		return nil, fmt.Errorf("accel: %s not found (apt-get install qemu-system-x86): %w", qemu, err)
	}
	sum, err := image.FileSHA256(kernel)
	if err != nil {
		return nil, fmt.Errorf("accel: the guest kernel: %w", err)
	}
	facts := p.ReadHost
	if facts == nil {
		facts = hostFacts
	}
	v := &Verdict{Kernel: kernel, KernelSHA256: sum, Host: facts(qpath), Version: cacheVersion}
	if v.Host.DevKVM != "ok" {
		v.Reason = "/dev/kvm: " + v.Host.DevKVM
		v.Checked = time.Now().UTC()
		return v, nil
	}
	cache := p.cachePath(v)
	if !p.NoCache && cache != "" {
		if c, err := readCached(cache); err == nil {
			c.Cached = true
			c.Kernel = kernel
			return c, nil
		}
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	bootFn := p.BootProbe
	if bootFn == nil {
		bootFn = BootKernel
	}
	b := bootFn(ctx, qpath, kernel, timeout)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	v.KVM, v.Reason = Classify(b, timeout)
	if !v.KVM {
		v.Reason += " (" + v.Host.Summary() + ")"
	}
	v.Console = lastLines(string(b.Console), 5)
	v.Seconds = b.Elapsed.Seconds()
	v.Checked = time.Now().UTC()
	if !p.NoCache && cache != "" {
		// A verdict that cannot be cached is still the verdict.
		_ = writeCached(cache, v)
	}
	return v, nil
}

// Markers of the probe guest's console (a stock Linux kernel with
// console=ttyS0 and no root file system).
const (
	bannerMarker = "Linux version "
	panicMarker  = "Kernel panic - not syncing"
)

// Classify reads a probe boot: KVM works when the kernel printed its
// banner and got as far as the panic that ends a boot without a root file
// system. Anything less is a failing KVM, with the reason in one line.
func Classify(b Boot, timeout time.Duration) (ok bool, reason string) {
	console := string(b.Console)
	banner := strings.Contains(console, bannerMarker)
	panicked := strings.Contains(console, panicMarker)
	switch {
	case banner && panicked:
		return true, fmt.Sprintf("a guest kernel booted under KVM in %.1f s", b.Elapsed.Seconds())
	case b.Exited && !banner && len(bytes.TrimSpace(b.Console)) == 0:
		msg := lastLines(string(b.Stderr), 1)
		if msg == "" && b.Err != nil {
			msg = b.Err.Error()
		}
		if msg == "" {
			msg = "no message"
		}
		return false, "QEMU could not run a guest under -accel kvm: " + msg
	case len(bytes.TrimSpace(b.Console)) == 0:
		return false, fmt.Sprintf("/dev/kvm opens, but a guest kernel printed nothing in %s under -accel kvm", timeout)
	case !banner:
		return false, fmt.Sprintf("/dev/kvm opens, but under -accel kvm the guest kernel never started (its loader printed %q)",
			lastLines(console, 1))
	case b.Exited:
		return false, fmt.Sprintf("the guest kernel stopped under -accel kvm before it finished booting (last line %q)",
			lastLines(console, 1))
	default:
		return false, fmt.Sprintf("the guest kernel started under -accel kvm but did not finish booting in %s (last line %q)",
			timeout, lastLines(console, 1))
	}
}

// BootKernel boots kernel once under -accel kvm with no disk and no
// initramfs, its console on the serial port, and returns what it showed
// when QEMU exited (the kernel panics, and -no-reboot turns its reboot
// into an exit) or when timeout ran out (QEMU is killed then).
func BootKernel(ctx context.Context, qemu, kernel string, timeout time.Duration) Boot {
	return bootWith(ctx, qemu, timeout, KVM, "-kernel", kernel,
		"-append", "console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1 loglevel=7")
}

// bootWith runs QEMU with accelerator accel, a small machine of QEMU's
// default type, the serial console captured, and extra arguments.
func bootWith(ctx context.Context, qemu string, timeout time.Duration, accel string, extra ...string) Boot {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append([]string{"-accel", accel, "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config",
		"-display", "none", "-monitor", "none", "-no-reboot", "-serial", "stdio"}, extra...)
	cmd := exec.CommandContext(ctx, qemu, args...)
	// The probe's QEMU dies with this process, however it ends: a hung
	// probe guest must not spin on after a killed `hinic deploy rack`
	// or test run. The timeout and cancellation kill its whole group.
	childproc.Tie(cmd)
	defer childproc.KillGroup(cmd)
	var console, stderr limitedBuffer
	console.max, stderr.max = 1<<20, 64<<10
	cmd.Stdout, cmd.Stderr = &console, &stderr
	cmd.WaitDelay = 2 * time.Second
	t := time.Now()
	err := cmd.Run()
	b := Boot{Console: console.Bytes(), Stderr: stderr.Bytes(), Elapsed: time.Since(t), Err: err}
	b.Exited = ctx.Err() == nil
	return b
}

// Choose picks the accelerator for a rack spec's accel: "tcg" as it is;
// "kvm" only when the probe passes, else an error at once; "auto" KVM when
// the probe passes, else TCG. why is one line for the user.
func (p *Prober) Choose(ctx context.Context, spec, kernel string) (accel, why string, err error) {
	switch spec {
	case TCG:
		return TCG, "accel: tcg in the rack spec", nil
	case KVM, Auto:
	default:
		return "", "", fmt.Errorf("accel %q: want tcg, kvm or auto", spec)
	}
	v, err := p.Probe(ctx, kernel)
	if err != nil {
		if spec == KVM {
			return "", "", fmt.Errorf("accel: kvm, but the KVM probe could not run: %w", err)
		}
		return TCG, "TCG: the KVM probe could not run: " + err.Error(), nil
	}
	if v.KVM {
		return KVM, "KVM: " + v.Reason + cachedNote(v), nil
	}
	if spec == KVM {
		return "", "", fmt.Errorf("accel: kvm, but KVM cannot boot a guest kernel on this host: %s%s; use accel: tcg or auto",
			v.Reason, cachedNote(v))
	}
	return TCG, "TCG: " + v.Reason + cachedNote(v), nil
}

func cachedNote(v *Verdict) string {
	if v.Cached {
		return fmt.Sprintf(" [probed %s]", v.Checked.Format(time.RFC3339))
	}
	return ""
}

// hostFacts reads the host's KVM facts.
func hostFacts(qemu string) HostFacts {
	h := HostFacts{DevKVM: "ok", CPUVirt: "none"}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		h.DevKVM = err.Error()
	} else {
		f.Close()
	}
	h.CPUVirt = cpuVirt("/proc/cpuinfo")
	if ents, err := os.ReadDir("/sys/module"); err == nil {
		for _, e := range ents {
			if n := e.Name(); n == "kvm" || strings.HasPrefix(n, "kvm_") {
				h.Modules = append(h.Modules, n)
			}
		}
	}
	h.HostKernel = strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	h.BootID = strings.TrimSpace(readFile("/proc/sys/kernel/random/boot_id"))
	if st, err := os.Stat(qemu); err == nil {
		h.QEMU = fmt.Sprintf("%s %d %d", qemu, st.Size(), st.ModTime().Unix())
	}
	return h
}

// cpuVirt is "vmx", "svm" or "none", from the flags lines of a cpuinfo.
func cpuVirt(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "none"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		flags := strings.Fields(v)
		for _, want := range []string{"vmx", "svm"} {
			if slices.Contains(flags, want) {
				return want
			}
		}
	}
	return "none"
}

// cachePath is the verdict's file: one per host state and guest kernel.
func (p *Prober) cachePath(v *Verdict) string {
	dir := p.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "hinic", "kvm-probe")
	}
	key, _ := json.Marshal(struct {
		V      int
		H      HostFacts
		BootID string
		Kernel string
	}{cacheVersion, v.Host, v.Host.BootID, v.KernelSHA256})
	sum := sha256.Sum256(key)
	return filepath.Join(dir, hex.EncodeToString(sum[:16])+".json")
}

func readCached(path string) (*Verdict, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if v.Version != cacheVersion || v.Reason == "" {
		return nil, errors.New("accel: stale cached verdict")
	}
	return &v, nil
}

func writeCached(path string, v *Verdict) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".verdict-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// lastLines returns the last n non-blank lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append(out, l)
		}
	}
	slices.Reverse(out)
	return strings.Join(out, " | ")
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
