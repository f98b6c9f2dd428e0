// Package build implements `hinic pkg build`.
package build

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/image"
	"github.com/PacketFive/hinic/internal/pkg"
)

// Setting keys.
const (
	KeyKernel    = "pkg.kernel"
	KeyOut       = "pkg.out"
	KeyOnly      = "pkg.only"
	KeyFix       = "pkg.fix"
	KeyNoLintian = "pkg.no-lintian"
)

// DefaultOut is where packages go without --out.
const DefaultOut = "dist/pkg"

// Options are the settings of one build.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Context context.Context
	Verbose bool

	// Repo is the HiNIC checkout; "" finds it from the working directory.
	Repo      string
	Kernel    string
	Out       string
	Only      []string
	Fix       bool
	NoLintian bool
	// Commands is the command tree whose man pages and completions go
	// into the hinic package.
	Commands *cobra.Command
}

const long = `Build HiNIC's Debian packages from this checkout into --out:

  hinic                 the host tools: /usr/bin/hinic, bash/zsh/fish
                        completions, man pages, example rack specs, the
                        hinic-fabric systemd unit and /etc/hinic/fabric.yaml
  hicain-dkms           the kernel module sources with a dkms.conf
  hicain-modules-KVER   the modules (hicain_*.ko, higpu.ko) for kernel KVER only
  libhicain             the libibverbs provider (libhicain-rdmav34.so)
  libhicart1            the HiGPU runtime library (libhicart.so.1)
  libhicart-dev         its header, libhicart.so link, pkg-config file
  hicart-tools          hicart-smi, hicart-bandwidth, hicart-p2p, hicart-allreduce, hicart_test

Everything packaged is compiled here: hinic with go build -trimpath, the
modules of kernel/Kbuild's obj-m against /lib/modules/KVER/build, the
provider with make -C rdma-core and the HiGPU runtime with make -C hicart
(docs/packaging.md has the contracts).
With --fix, missing linux-headers-KVER, libibverbs-dev and lintian are
installed with apt-get. libhicain is listed as not built while
rdma-core/providers/hicain is absent.

KVER defaults to the kernel hinic image build puts in guests (what
linux-image-amd64 depends on in the host's apt lists). Builds are
reproducible: file and archive times come from SOURCE_DATE_EPOCH, else the
last commit's time; the same inputs give the same bytes.

Each package is checked with lintian (--pedantic, info tags shown): an
error tag fails the command; warnings are listed on standard error and
justified in docs/packaging.md. The man pages and completions describe the
running hinic, so run the hinic built from this same checkout (go run
./cmd/hinic pkg build, or make build && bin/hinic pkg build).`

// NewCmdBuild returns the `pkg build` command; runF replaces the run in tests.
func NewCmdBuild(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the .deb packages (hinic, hicain-*, libhicain, libhicart1, libhicart-dev, hicart-tools)",
		Long:  long,
		Example: `  hinic pkg build
  hinic pkg build --kernel 6.1.0-57-amd64 --out dist/pkg
  sudo hinic pkg build --fix --only hicain-modules,hicain-dkms
  SOURCE_DATE_EPOCH=1767225600 hinic pkg build -o json | jq -r .sha256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Context = cmd.Context()
			opts.Commands = cmd.Root()
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			opts.Verbose = f.Verbose()
			opts.Kernel = strings.TrimPrefix(cfg.GetString(KeyKernel), "linux-image-")
			opts.Out = cfg.GetString(KeyOut)
			opts.Fix = cfg.GetBool(KeyFix)
			opts.NoLintian = cfg.GetBool(KeyNoLintian)
			opts.Only = nil
			for _, s := range cfg.GetStringSlice(KeyOnly) {
				for _, n := range strings.Split(s, ",") {
					if n = strings.TrimSpace(n); n == "" {
						continue
					}
					if !slices.Contains(pkg.Names, n) {
						return cmdutil.UsageErrorf("--only %s: unknown package; valid names are %s", n, strings.Join(pkg.Names, ", "))
					}
					if !slices.Contains(opts.Only, n) {
						opts.Only = append(opts.Only, n)
					}
				}
			}
			if opts.Kernel != "" && !pkg.KernelRelease.MatchString(opts.Kernel) {
				return cmdutil.UsageErrorf("--kernel %s: not a kernel release such as 6.1.0-57-amd64", opts.Kernel)
			}
			if opts.Out == "" {
				return cmdutil.UsageErrorf("--out is empty")
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.String("kernel", "", "kernel release to build hicain-modules for, e.g. 6.1.0-57-amd64 (default: the guest image's kernel)")
	f.BindFlag(KeyKernel, fl.Lookup("kernel"))
	fl.String("out", DefaultOut, "write the packages into `DIR`")
	f.BindFlag(KeyOut, fl.Lookup("out"))
	fl.StringSlice("only", nil, "build only these packages: `NAMES` from "+strings.Join(pkg.Names, ","))
	f.BindFlag(KeyOnly, fl.Lookup("only"))
	fl.Bool("fix", false, "install missing kernel headers, libibverbs-dev and lintian with apt-get (as root)")
	f.BindFlag(KeyFix, fl.Lookup("fix"))
	fl.Bool("no-lintian", false, "do not check the packages with lintian")
	f.BindFlag(KeyNoLintian, fl.Lookup("no-lintian"))
	return cmd
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
	repo := opts.Repo
	if repo == "" {
		if repo, err = FindRepo("."); err != nil {
			return err
		}
	}
	if opts.Kernel == "" && (len(opts.Only) == 0 || slices.Contains(opts.Only, pkg.NameModules)) {
		kpkg, err := image.ResolveKernel(ctx)
		if err != nil {
			return fmt.Errorf("pkg: no guest kernel to build hicain-modules for: %w", err)
		}
		opts.Kernel = strings.TrimPrefix(kpkg, "linux-image-")
	}
	var log io.Writer
	if opts.Verbose {
		log = opts.IO.ErrOut
	}
	results, err := pkg.Build(ctx, pkg.Options{
		Repo:     repo,
		Out:      opts.Out,
		Kernel:   opts.Kernel,
		Only:     opts.Only,
		Lintian:  !opts.NoLintian,
		Fix:      opts.Fix,
		Commands: opts.Commands,
		Progress: opts.IO.ErrOut,
		Log:      log,
	})
	if err != nil && !errors.Is(err, pkg.ErrLintian) {
		return err
	}
	if perr := print(printer, results, !opts.NoLintian); perr != nil {
		return perr
	}
	for _, r := range results {
		if !r.Built {
			fmt.Fprintf(opts.IO.ErrOut, "pkg: note: %s was %s\n", r.Name, r.Note)
		}
		for _, t := range r.Lintian {
			if t.Severity == "E" || t.Severity == "W" || opts.Verbose {
				fmt.Fprintf(opts.IO.ErrOut, "lintian: %s\n", t)
			}
		}
	}
	return err
}

func print(p *cmdutil.Printer, results []pkg.Result, lintian bool) error {
	w := p.Records("NAME", "VERSION", "FILE", "SIZE", "SHA256", "LINTIAN")
	for _, r := range results {
		if !r.Built {
			if err := w.Write(r, r.Package, r.Version, "not built", "-", "-", "-"); err != nil {
				return err
			}
			continue
		}
		if err := w.Write(r, r.Package, r.Version, r.File, humanSize(r.Size), r.SHA256, lintianSummary(r, lintian)); err != nil {
			return err
		}
	}
	return w.Close()
}

// lintianSummary is "clean", or the count of tags per severity ("1W 2I").
func lintianSummary(r pkg.Result, ran bool) string {
	if !ran || !r.Checked {
		return "not run"
	}
	var parts []string
	for _, sev := range []string{"E", "W", "I", "P", "X"} {
		n := 0
		for _, t := range r.Lintian {
			if t.Severity == sev {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", n, sev))
		}
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, " ")
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// FindRepo returns the HiNIC checkout containing dir: the nearest
// directory upwards whose go.mod declares module github.com/PacketFive/hinic.
func FindRepo(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if isHiNICModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("pkg: %s is not inside a HiNIC checkout (no go.mod of module %s above it); hinic pkg build packages the sources it runs in", abs, modulePath)
		}
	}
}

const modulePath = "github.com/PacketFive/hinic"

func isHiNICModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}
