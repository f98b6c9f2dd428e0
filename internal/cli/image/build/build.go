// Package build implements `hinic image build`.
package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/image"
)

// Options are the settings of one build.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Context context.Context

	Name          string
	Dir           string
	Suite         string
	Mirrors       []string
	Kernel        string
	Packages      []string
	Debs          []string
	Size          string
	AuthorizedKey string
	Force         bool
}

const long = `Build a Debian 12 guest image for QEMU racks, without loop mounts.

mmdebstrap (root mode) makes the root file system from Debian's packages
(the host's apt sources of the suite, including SUITE-updates and
SUITE-security, unless --mirror is given), mke2fs -d turns it into a
whole-disk ext4 image and qemu-img into a qcow2; the kernel and initramfs
are extracted for direct boot. The kernel is one exact
linux-image-6.1.0-N-amd64, resolved once from the host's apt lists (the
same suites), or given with --kernel; it is recorded in the manifest.

The image holds openssh-server, iproute2, rdma-core, ibverbs-utils,
ibverbs-providers, perftest, infiniband-diags, opensm, python3-pyverbs,
rdmacm-utils, ucx-utils, libfabric-bin, openmpi-bin, libopenmpi-dev, gcc,
and the .deb files given with --deb. SSH host keys are generated at first boot;
no password is set. The root's authorized key is passed at boot as the
systemd credential ssh.authorized_keys.root (hinic deploy does this), or
baked in with --authorized-key.

DIR receives root.qcow2, vmlinuz, initrd.img, build.log and manifest.json
(kernel, packages with versions, sizes, sha256 of each artifact, the boot
command line). When DIR already holds an image of the same spec, nothing is
rebuilt (--force rebuilds). A build takes about 4 minutes and needs root.`

// NewCmdBuild returns the `image build` command; runF replaces the run in tests.
func NewCmdBuild(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build a guest image (rootfs, qcow2, kernel, initramfs, manifest)",
		Long:  long,
		Example: `  sudo hinic image build
  sudo hinic image build --dir .cache/images/hinic --deb hicain-dkms_0.1_all.deb
  hinic image build -o json | jq .kernel_release`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Context = cmd.Context()
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			opts.Dir = cfg.GetString("image.dir")
			opts.Suite = cfg.GetString("image.suite")
			opts.Size = cfg.GetString("image.size")
			opts.Kernel = cfg.GetString("image.kernel")
			if opts.Dir == "" {
				opts.Dir = DefaultDir(opts.Name)
			}
			for _, d := range opts.Debs {
				if !strings.HasSuffix(d, ".deb") {
					return cmdutil.UsageErrorf("--deb %s: not a .deb file", d)
				}
				if _, err := os.Stat(d); err != nil {
					return cmdutil.UsageErrorf("--deb %s: %v", d, err)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Name, "name", "hinic-guest", "image name")
	fl.String("dir", "", "output `DIR` (default .cache/images/NAME)")
	f.BindFlag("image.dir", fl.Lookup("dir"))
	fl.String("suite", "bookworm", "Debian suite")
	f.BindFlag("image.suite", fl.Lookup("suite"))
	fl.String("size", "3G", "size of the ext4 file system (sparse)")
	f.BindFlag("image.size", fl.Lookup("size"))
	fl.String("kernel", "", "exact kernel package, e.g. linux-image-6.1.0-57-amd64 (default: resolved from the host's apt lists)")
	f.BindFlag("image.kernel", fl.Lookup("kernel"))
	fl.StringArrayVar(&opts.Mirrors, "mirror", nil, "a sources line `\"deb URI SUITE COMPONENTS\"` (repeatable; default: the host's)")
	fl.StringArrayVar(&opts.Packages, "package", nil, "extra Debian `PACKAGE` to install (repeatable)")
	fl.StringArrayVar(&opts.Debs, "deb", nil, "extra .deb `FILE` to install (repeatable)")
	fl.StringVar(&opts.AuthorizedKey, "authorized-key", "", "bake this public key `FILE` into /root/.ssh/authorized_keys")
	fl.BoolVar(&opts.Force, "force", false, "rebuild even if DIR holds an image of the same spec")
	return cmd
}

// DefaultDir is where an image is built when no --dir is given.
func DefaultDir(name string) string {
	return filepath.Join(".cache", "images", name)
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	spec, err := Spec(ctx, opts)
	if err != nil {
		return err
	}
	prog := newProgress(opts.IO.ErrOut, opts.IO.ErrIsTerminal)
	res, err := image.Build(ctx, spec, image.BuildOptions{Dir: opts.Dir, Force: opts.Force, Progress: prog})
	prog.finish()
	if err != nil {
		return err
	}
	m := res.Manifest
	if res.Cached {
		fmt.Fprintf(opts.IO.ErrOut, "image: %s is up to date (built %s in %.0f s); --force rebuilds\n", res.Dir, m.Built.Format(time.RFC3339), m.BuildSeconds)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "image: built %s in %.0f s\n", res.Dir, m.BuildSeconds)
	}
	if printer.Format() == cmdutil.FormatJSON {
		return printer.Object(m)
	}
	w := printer.Records("FIELD", "VALUE")
	rows := [][2]string{
		{"dir", res.Dir},
		{"kernel", fmt.Sprintf("%s (%s, %s)", m.KernelRelease, m.KernelPackage, m.KernelVersion)},
		{"packages", fmt.Sprint(len(m.Packages))},
		{"rootfs", fmt.Sprintf("%d MiB", m.RootfsBytes>>20)},
		{"cmdline", m.Cmdline},
	}
	for _, a := range m.Artifacts {
		rows = append(rows, [2]string{a.Name, fmt.Sprintf("%d MiB sha256:%s", a.Size>>20, a.SHA256[:16])})
	}
	for _, r := range rows {
		if err := w.Write(map[string]string{"field": r[0], "value": r[1]}, r[0], r[1]); err != nil {
			return err
		}
	}
	return w.Close()
}

// Spec turns the options into an image spec, resolving the host's mirrors
// and the kernel.
func Spec(ctx context.Context, opts *Options) (image.Spec, error) {
	spec := image.Spec{Name: opts.Name, Suite: opts.Suite, Size: opts.Size, Kernel: opts.Kernel}
	spec.Packages = append(append([]string{}, image.BasePackages...), opts.Packages...)
	var err error
	spec.Mirrors = opts.Mirrors
	if len(spec.Mirrors) == 0 {
		if spec.Mirrors, err = image.HostMirrors("/", opts.Suite); err != nil {
			return spec, err
		}
	}
	if spec.Kernel == "" {
		if spec.Kernel, err = image.ResolveKernel(ctx); err != nil {
			return spec, err
		}
	}
	for _, d := range opts.Debs {
		b, err := os.ReadFile(d)
		if err != nil {
			return spec, err
		}
		sum := sha256.Sum256(b)
		spec.Debs = append(spec.Debs, hex.EncodeToString(sum[:])+":"+d)
	}
	if opts.AuthorizedKey != "" {
		b, err := os.ReadFile(opts.AuthorizedKey)
		if err != nil {
			return spec, err
		}
		spec.AuthorizedKey = string(b)
	}
	return spec, nil
}

// progress shows a spinner per step on a terminal, and one line per step
// otherwise (CI logs).
type progress struct {
	w   io.Writer
	tty bool
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty} }

func (p *progress) Step(name string) {
	if !p.tty {
		fmt.Fprintf(p.w, "image: %s ...\n", name)
		return
	}
	p.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(name),
		progressbar.OptionSpinnerType(14), progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionClearOnFinish())
}

func (p *progress) Detail(line string) {
	if p.bar != nil {
		if len(line) > 60 {
			line = line[:60]
		}
		p.bar.Describe(line)
		_ = p.bar.Add(1)
	}
}

func (p *progress) Done(name string, d time.Duration) {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
	fmt.Fprintf(p.w, "image: %s done in %.1f s\n", name, d.Seconds())
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Exit()
		p.bar = nil
	}
}
