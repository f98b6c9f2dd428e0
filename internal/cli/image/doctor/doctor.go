// Package doctor implements `hinic doctor`: it lists the host tools that
// image building, rack deployment and the SSH gate need, and with --fix
// installs the missing ones through apt; it reports the accelerator that
// racks with accel: auto get here, from the KVM probe.
package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/image"
)

// Options are the settings of one doctor run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Context context.Context
	Fix     bool
	Kernel  string // the guest kernel to probe KVM with ("" finds one)
	Reprobe bool   // ignore a cached KVM verdict
	Prober  *accel.Prober
}

// Report is the doctor's JSON output.
type Report struct {
	Tools []Check  `json:"tools"`
	Accel AccelRep `json:"accel"`
}

// AccelRep is what racks with accel: auto run under, and why.
type AccelRep struct {
	Accel   string         `json:"accel"` // tcg or kvm
	Why     string         `json:"why"`
	Verdict *accel.Verdict `json:"verdict,omitempty"` // the KVM probe's, when it ran
}

// Check is one line of the doctor's report.
type Check struct {
	Tool    string `json:"tool"`
	Package string `json:"package"`
	Path    string `json:"path"`
	OK      bool   `json:"ok"`
	Purpose string `json:"purpose"`
}

// NewCmdDoctor returns the `doctor` command; runF replaces the run in tests.
func NewCmdDoctor(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check (and with --fix install) the host tools for images, racks and the SSH gate",
		Long: `List the host programs that hinic image build, hinic deploy and the SSH
gate need, the Debian package of each and whether it is installed. With
--fix, install the missing packages with apt-get (as root). Exits 3 when a
tool is still missing.

Then the accelerator that a rack with accel: auto gets on this host, and
the KVM probe's verdict. An open /dev/kvm is not enough: the probe boots
a guest kernel once under -accel kvm (no disk, up to 20 s) and KVM counts
only when it prints its banner and finishes booting. The verdict is cached
per host boot, KVM modules, QEMU and kernel (in the user's cache
directory, hinic/kvm-probe); --reprobe ignores it. The kernel is --kernel,
else the default image's (` + "`.cache/images/hinic-guest/vmlinuz`" + `), else the newest
/boot/vmlinuz-*.`,
		Example: "  hinic doctor\n  sudo hinic doctor --fix\n  hinic doctor --kernel .cache/images/hinic-hicain/vmlinuz --reprobe",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Context = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Fix, "fix", false, "install missing packages with apt-get")
	cmd.Flags().StringVar(&opts.Kernel, "kernel", "", "guest kernel to probe KVM with (default: the default image's, else the newest /boot/vmlinuz-*)")
	cmd.Flags().BoolVar(&opts.Reprobe, "reprobe", false, "probe KVM again instead of reading the cached verdict")
	return cmd
}

// Checks reports every tool.
func Checks() []Check {
	var out []Check
	for _, t := range image.Tools {
		c := Check{Tool: t.Name, Package: t.Package, Purpose: t.Purpose}
		if p, err := image.LookTool(t.Name); err == nil {
			c.Path, c.OK = p, true
		}
		out = append(out, c)
	}
	return out
}

func run(opts *Options) error {
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	if opts.Fix {
		var pkgs []string
		for _, c := range Checks() {
			if !c.OK {
				pkgs = append(pkgs, c.Package)
			}
		}
		if len(pkgs) > 0 {
			if os.Geteuid() != 0 {
				return fmt.Errorf("doctor: --fix needs root; run: sudo apt-get install %v", pkgs)
			}
			fmt.Fprintf(opts.IO.ErrOut, "doctor: installing %v\n", pkgs)
			for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)} {
				cmd := exec.Command("apt-get", args...)
				cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
				cmd.Stdout, cmd.Stderr = opts.IO.ErrOut, opts.IO.ErrOut
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("doctor: apt-get %s: %w", args[0], err)
				}
			}
		}
	}
	checks := Checks()
	acc := probeAccel(opts)
	missing := 0
	if printer.Format() == cmdutil.FormatJSON {
		if err := printer.Object(Report{Tools: checks, Accel: acc}); err != nil {
			return err
		}
	} else {
		w := printer.Records("TOOL", "PACKAGE", "STATUS", "PATH", "NEEDED FOR")
		for _, c := range checks {
			st := "ok"
			if !c.OK {
				st = "missing"
			}
			if err := w.Write(c, c.Tool, c.Package, st, c.Path, c.Purpose); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		fmt.Fprintln(opts.IO.Out)
		if err := printer.Object(acc, accelFields(acc)...); err != nil {
			return err
		}
	}
	for _, c := range checks {
		if !c.OK {
			missing++
		}
	}
	if missing > 0 {
		return cmdutil.VerifyErrorf("%d tools missing; run `sudo hinic doctor --fix`", missing)
	}
	return nil
}

// probeAccel runs (or reads) the KVM probe the way deploy does for a rack
// with accel: auto.
func probeAccel(opts *Options) AccelRep {
	kernel := opts.Kernel
	if kernel == "" {
		kernel = findKernel()
	}
	if kernel == "" {
		return AccelRep{Accel: accel.TCG, Why: "TCG: KVM not probed: no guest kernel (hinic image build makes one, or pass --kernel)"}
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	pr := opts.Prober
	if pr == nil {
		pr = &accel.Prober{}
	}
	pr.NoCache = pr.NoCache || opts.Reprobe
	fmt.Fprintf(opts.IO.ErrOut, "doctor: KVM probe with %s (a boot of up to %s, once per host and kernel)\n", kernel, accel.DefaultTimeout)
	v, err := pr.Probe(ctx, kernel)
	if err != nil {
		return AccelRep{Accel: accel.TCG, Why: "TCG: the KVM probe could not run: " + err.Error()}
	}
	if v.KVM {
		return AccelRep{Accel: accel.KVM, Why: "KVM: " + v.Reason, Verdict: v}
	}
	return AccelRep{Accel: accel.TCG, Why: "TCG: " + v.Reason, Verdict: v}
}

// findKernel is the default image's kernel, else the newest in /boot.
func findKernel() string {
	if p := filepath.Join(deploy.DefaultImage, image.FileKernel); fileExists(p) {
		return p
	}
	ks, _ := filepath.Glob("/boot/vmlinuz-*")
	slices.Sort(ks)
	for i := len(ks) - 1; i >= 0; i-- {
		if f, err := os.Open(ks[i]); err == nil {
			f.Close()
			return ks[i]
		}
	}
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func accelFields(a AccelRep) []cmdutil.Field {
	f := []cmdutil.Field{{Name: "accel auto", Value: a.Accel}, {Name: "why", Value: a.Why}}
	if v := a.Verdict; v != nil {
		when := v.Checked.Local().Format(time.DateTime)
		if v.Cached {
			when += " (cached; --reprobe to probe again)"
		}
		f = append(f,
			cmdutil.Field{Name: "kernel probed", Value: v.Kernel},
			cmdutil.Field{Name: "/dev/kvm", Value: devKVM(v.Host.DevKVM)},
			cmdutil.Field{Name: "host", Value: v.Host.Summary()},
			cmdutil.Field{Name: "probed", Value: when})
		if v.Console != "" {
			f = append(f, cmdutil.Field{Name: "probe console", Value: v.Console})
		}
	}
	return f
}

func devKVM(s string) string {
	if s == "ok" {
		return "opens read-write (which alone does not mean that KVM works)"
	}
	return s
}
