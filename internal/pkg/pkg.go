// Package pkg builds HiNIC's Debian packages with nfpm used as a library:
//
//   - hicain-modules-KVER: hicain_*.ko prebuilt for one exact kernel;
//   - hicain-dkms: the module sources with a dkms.conf;
//   - libhicain: the libibverbs provider (libhicain-rdmav34.so, hicain.driver);
//   - libhicart1, libhicart-dev, hicart-tools: the HiGPU runtime library,
//     its development files, and its tools (hicart/);
//   - hinic: the host tools (binary, completions, man pages, rack examples,
//     the hinic-fabric systemd unit).
//
// pkg compiles what it packages (the modules against the kernel's headers,
// the provider through its Makefile, the binary with go build) in a
// staging directory, packs the staged files with fixed modes, owners and
// times, and checks each .deb with lintian. The same inputs and
// SOURCE_DATE_EPOCH give the same bytes. docs/packaging.md describes the
// packages and the provider's build contract.
//
// pkg runs host tools (make, gcc, strip, go, dpkg-query, lintian, apt-get)
// as child processes. It imports no other HiNIC package; the command tree
// whose man pages and completions it ships is handed in by the caller.
package pkg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The package names --only accepts. The modules package's Debian name
// carries the kernel release: hicain-modules-6.1.0-57-amd64. No name is
// hinic-something but the host tools, which carry no kernel module: Linux
// has a hinic (Huawei) driver that a same-named module would shadow.
const (
	NameHost     = "hinic"
	NameModules  = "hicain-modules"
	NameDKMS     = "hicain-dkms"
	NameProvider = "libhicain"
	// The HiGPU runtime (hicart/): library, development files, tools.
	NameHicart      = "libhicart1"
	NameHicartDev   = "libhicart-dev"
	NameHicartTools = "hicart-tools"
)

// Names lists every package in build order.
var Names = []string{NameHost, NameDKMS, NameModules, NameProvider, NameHicart, NameHicartDev, NameHicartTools}

// Fields shared by every package.
const (
	Maintainer = "HiNIC developers <hinic@packetfive.invalid>"
	Homepage   = "https://github.com/PacketFive/hinic"
	// Release is the Debian revision of every package.
	Release = "1"
)

// Repository paths the packages are built from, relative to the root.
const (
	KernelDir    = "kernel"
	ProviderDir  = "rdma-core"
	ProviderSrc  = "rdma-core/providers/hicain"
	PackagingDir = "packaging"
	RacksDir     = "testdata/racks"
)

// Options say what to build and from where.
type Options struct {
	// Repo is the repository root (where go.mod is).
	Repo string
	// Out receives the .deb files; created if missing.
	Out string
	// Kernel is the release the modules are built for (6.1.0-57-amd64).
	Kernel string
	// Only, if not empty, names the packages to build (Names).
	Only []string
	// Epoch is the time of every file and archive member. Zero means
	// ResolveEpoch.
	Epoch time.Time
	// Version is the upstream version; "" means ResolveVersion.
	Version string
	// Commit is linked into the binary; "" means git's HEAD, if any.
	Commit string
	// Lintian runs lintian on every package built.
	Lintian bool
	// Fix installs what is missing with apt-get: the kernel headers,
	// libibverbs-dev, lintian.
	Fix bool
	// Commands is the hinic command tree: its man pages and completion
	// scripts go into the hinic package. Required to build hinic.
	Commands *cobra.Command
	// Progress receives one line per step; Log the output of the tools
	// run. Either may be nil.
	Progress io.Writer
	Log      io.Writer
}

// Result describes one package: built, or why not.
type Result struct {
	Name    string        `json:"name"`    // as --only names it
	Package string        `json:"package"` // Debian package name
	Version string        `json:"version"` // Debian version
	Arch    string        `json:"arch"`
	Built   bool          `json:"built"`
	File    string        `json:"file,omitempty"`
	Size    int64         `json:"size,omitempty"`
	SHA256  string        `json:"sha256,omitempty"`
	Lintian []LintianTag  `json:"lintian"`
	Checked bool          `json:"lintian_checked"` // lintian ran on it
	Note    string        `json:"note,omitempty"`
	Elapsed time.Duration `json:"-"`
}

// ErrLintian is wrapped by the error Build returns when lintian reports
// an error (E) tag.
var ErrLintian = errors.New("lintian reported errors")

// KernelRelease matches a kernel release (uname -r), which names the
// modules package and its paths.
var KernelRelease = regexp.MustCompile(`^[0-9][A-Za-z0-9.+_~-]*$`)

// DefaultEpoch is the time used when SOURCE_DATE_EPOCH is unset and the
// repository is not a git checkout: 2026-01-01T00:00:00Z.
const DefaultEpoch = 1767225600

// build is the state of one Build.
type build struct {
	opts    Options
	version string // upstream
	commit  string
	epoch   time.Time
	stage   string
	arch    string // Debian architecture of the host
	hicart  hicartTree
}

// Build builds the packages opts asks for and returns one Result per
// package, in Names order. A package that cannot be built for a reason
// the caller should see but that is not an error (libhicain without its
// sources) has Built false and a Note. When lintian finds errors, the
// results are returned with an error wrapping ErrLintian.
func Build(ctx context.Context, opts Options) ([]Result, error) {
	for _, n := range opts.Only {
		if !slices.Contains(Names, n) {
			return nil, fmt.Errorf("pkg: unknown package %q: valid names are %s", n, strings.Join(Names, ", "))
		}
	}
	if opts.Repo == "" {
		opts.Repo = "."
	}
	repo, err := filepath.Abs(opts.Repo)
	if err != nil {
		return nil, err
	}
	opts.Repo = repo
	if opts.Out == "" {
		return nil, errors.New("pkg: no output directory")
	}
	if opts.wants(NameModules) && !KernelRelease.MatchString(opts.Kernel) {
		return nil, fmt.Errorf("pkg: kernel release %q: want one such as 6.1.0-57-amd64 (uname -r)", opts.Kernel)
	}
	if opts.Commands == nil && opts.wants(NameHost) {
		return nil, errors.New("pkg: no command tree for the hinic package's man pages")
	}
	b := &build{opts: opts, arch: DebArch()}
	if b.arch == "" {
		return nil, fmt.Errorf("pkg: no Debian architecture for GOARCH %s", goarch())
	}
	if b.epoch = opts.Epoch; b.epoch.IsZero() {
		if b.epoch, err = ResolveEpoch(ctx, repo); err != nil {
			return nil, err
		}
	}
	b.epoch = b.epoch.UTC()
	if b.commit = opts.Commit; b.commit == "" {
		b.commit = gitOutput(ctx, repo, "rev-parse", "HEAD")
	}
	if b.version = opts.Version; b.version == "" {
		b.version = ResolveVersion(ctx, repo, b.epoch)
	}
	if err := checkVersion(b.version); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("pkg: %w", err)
	}
	if b.stage, err = os.MkdirTemp("", "hinic-pkg-"); err != nil {
		return nil, fmt.Errorf("pkg: %w", err)
	}
	defer os.RemoveAll(b.stage)

	steps := map[string]func(context.Context) (Result, error){
		NameHost:        b.host,
		NameDKMS:        b.dkms,
		NameModules:     b.modules,
		NameProvider:    b.provider,
		NameHicart:      b.hicartLib,
		NameHicartDev:   b.hicartDev,
		NameHicartTools: b.hicartTools,
	}
	var results []Result
	for _, name := range Names {
		if !opts.wants(name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return results, err
		}
		start := time.Now()
		b.progress("%s: building", name)
		r, err := steps[name](ctx)
		if err != nil {
			return results, err
		}
		r.Name = name
		r.Elapsed = time.Since(start)
		if r.Built {
			b.progress("%s: %s (%d bytes) in %.1f s", name, filepath.Base(r.File), r.Size, r.Elapsed.Seconds())
		} else {
			b.progress("%s: %s", name, r.Note)
		}
		results = append(results, r)
	}
	if opts.Lintian {
		if err := b.lintian(ctx, results); err != nil {
			return results, err
		}
	}
	return results, nil
}

// wants reports whether package name is to be built.
func (o *Options) wants(name string) bool {
	return len(o.Only) == 0 || slices.Contains(o.Only, name)
}

func (b *build) progress(format string, a ...any) {
	if b.opts.Progress != nil {
		fmt.Fprintf(b.opts.Progress, "pkg: "+format+"\n", a...)
	}
}

func (b *build) log() io.Writer {
	if b.opts.Log != nil {
		return b.opts.Log
	}
	return io.Discard
}

// debVersion is the Debian version of every package.
func (b *build) debVersion() string { return b.version + "-" + Release }

// dir returns a new directory under the stage.
func (b *build) dir(elem ...string) (string, error) {
	d := filepath.Join(append([]string{b.stage}, elem...)...)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("pkg: %w", err)
	}
	return d, nil
}

// finish fills in a built package's file, size and sha256.
func finish(r *Result, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	r.File, r.Size, r.SHA256, r.Built = path, n, hex.EncodeToString(h.Sum(nil)), true
	return nil
}
