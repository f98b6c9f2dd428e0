package pkg

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Paths in the hinic package. .goreleaser.yaml's nfpms section uses the
// same ones (internal/pkg's tests compare them).
const (
	HostBinary     = "/usr/bin/hinic"
	BashCompletion = "/usr/share/bash-completion/completions/hinic"
	ZshCompletion  = "/usr/share/zsh/vendor-completions/_hinic"
	FishCompletion = "/usr/share/fish/vendor_completions.d/hinic.fish"
	ManDir         = "/usr/share/man/man1"
	HostSection    = "net"
	// CLIPackage holds the variables -X sets (as in the Makefile).
	CLIPackage = "github.com/PacketFive/hinic/internal/cli"
)

// HostDescription is the hinic package's synopsis and extended
// description (folded when packed).
const HostDescription = "software-emulated RDMA NIC and fabric (host tools)\n" +
	"HiNIC emulates an RDMA data-center fabric for developing and testing RDMA " +
	"software on machines without RDMA hardware. The hinic command runs the " +
	"emulated switch (hinic fabric serve, also as the hinic-fabric systemd unit) " +
	"and NIC backends for QEMU guests, and builds guest images and packages, " +
	"deploys QEMU racks and verifies them end to end."

// HostDepends are what the hinic package's maintainer scripts run:
// adduser makes the hinic system user that hinic-fabric.service runs as.
var HostDepends = []string{"adduser"}

// HostRecommends are the host tools hinic image build and deploy run.
var HostRecommends = []string{"qemu-system-x86", "qemu-utils", "mmdebstrap", "e2fsprogs"}

// HostFile is a file of the hinic package taken from the repository as
// it is.
type HostFile struct {
	Src    string // relative to the repository root
	Dst    string
	Mode   fs.FileMode
	Config bool // a conffile
}

// GrafanaDashboard is where the hinic package puts the Grafana dashboard
// of the --metrics endpoints (docs/metrics.md).
const GrafanaDashboard = "/usr/share/hinic/grafana/hinic.json"

// HostFiles lists the repository files of the hinic package: the
// systemd units, the switch unit's config file, the Grafana dashboard, the example rack
// specs.
func HostFiles(repo string) ([]HostFile, error) {
	out := []HostFile{
		{Src: "packaging/hinic/hinic-fabric.service", Dst: "/lib/systemd/system/hinic-fabric.service", Mode: modeFile},
		// The template units deploy runs a libvirt host's fabric and
		// device backend as (internal/deploy/units.go).
		{Src: "packaging/hinic/hinic-fabric@.service", Dst: "/lib/systemd/system/hinic-fabric@.service", Mode: modeFile},
		{Src: "packaging/hinic/hinic-device@.service", Dst: "/lib/systemd/system/hinic-device@.service", Mode: modeFile},
		{Src: "packaging/hinic/fabric.yaml", Dst: "/etc/hinic/fabric.yaml", Mode: modeFile, Config: true},
		{Src: "packaging/grafana/hinic.json", Dst: GrafanaDashboard, Mode: modeFile},
	}
	racks, err := filepath.Glob(filepath.Join(repo, RacksDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(racks) == 0 {
		return nil, fmt.Errorf("pkg: no example rack specs in %s", RacksDir)
	}
	slices.Sort(racks)
	for _, r := range racks {
		out = append(out, HostFile{
			Src:  RacksDir + "/" + filepath.Base(r),
			Dst:  "/usr/share/doc/hinic/examples/racks/" + filepath.Base(r),
			Mode: modeFile,
		})
	}
	return out, nil
}

// goTool finds the go command: on PATH, else Go's standard install.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		return "/usr/local/go/bin/go", nil
	}
	return "", fmt.Errorf("pkg: the go command is not on PATH (the hinic package builds hinic from source)")
}

// host builds the hinic package. The binary is built from Repo rather
// than copied from the running one, so the package's version, commit and
// code are those of the sources it was built from.
func (b *build) host(ctx context.Context) (Result, error) {
	gobin, err := goTool()
	if err != nil {
		return Result{}, err
	}
	root, err := b.dir("host")
	if err != nil {
		return Result{}, err
	}
	bin := filepath.Join(root, "hinic")
	commit := b.commit
	if commit == "" {
		commit = "unknown"
	}
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X", CLIPackage + ".version=v" + b.version,
		"-X", CLIPackage + ".commit=" + commit,
		"-X", CLIPackage + ".date=" + b.epoch.Format("2006-01-02T15:04:05Z"),
	}, " ")
	b.progress("%s: go build ./cmd/hinic", NameHost)
	if err := b.run(ctx, b.opts.Repo, []string{"CGO_ENABLED=0"}, gobin, "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/hinic"); err != nil {
		return Result{}, fmt.Errorf("pkg: building hinic: %w", err)
	}
	entries := []entry{{Src: bin, Dst: HostBinary, Mode: modeExec}}

	docs, err := b.hostDocs(root)
	if err != nil {
		return Result{}, err
	}
	entries = append(entries, docs...)
	hf, err := HostFiles(b.opts.Repo)
	if err != nil {
		return Result{}, err
	}
	for _, f := range hf {
		e := entry{Src: filepath.Join(b.opts.Repo, f.Src), Dst: f.Dst, Mode: f.Mode}
		if f.Config {
			e.Type = files.TypeConfig
		}
		entries = append(entries, e)
	}
	var sc nfpm.Scripts
	for _, x := range []struct {
		name string
		dst  *string
	}{{"postinst", &sc.PostInstall}, {"prerm", &sc.PreRemove}, {"postrm", &sc.PostRemove}} {
		if *x.dst, err = b.script(NameHost, x.name, nil); err != nil {
			return Result{}, err
		}
	}
	return b.pack(debSpec{
		Name:        NameHost,
		Arch:        b.arch,
		Section:     HostSection,
		Description: HostDescription,
		Depends:     HostDepends,
		Recommends:  HostRecommends,
		Entries:     entries,
		Scripts:     sc,
		Dir:         NameHost,
	})
}

// hostDocs writes the completion scripts and man pages of the command
// tree into dir and returns their entries.
func (b *build) hostDocs(dir string) ([]entry, error) {
	root := b.opts.Commands
	var entries []entry
	for _, c := range []struct {
		dst string
		gen func(io.Writer) error
	}{
		{BashCompletion, func(w io.Writer) error { return root.GenBashCompletionV2(w, true) }},
		{ZshCompletion, root.GenZshCompletion},
		{FishCompletion, func(w io.Writer) error { return root.GenFishCompletion(w, true) }},
	} {
		var buf bytes.Buffer
		if err := c.gen(&buf); err != nil {
			return nil, fmt.Errorf("pkg: completion %s: %w", c.dst, err)
		}
		p := filepath.Join(dir, "completion-"+filepath.Base(c.dst))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		entries = append(entries, entry{Src: p, Dst: c.dst, Mode: modeFile})
	}

	man := filepath.Join(dir, "man")
	if err := os.MkdirAll(man, 0o755); err != nil {
		return nil, err
	}
	disableAutoGenTag(root)
	date := b.epoch
	err := doc.GenManTreeFromOpts(root, doc.GenManTreeOptions{
		Header: &doc.GenManHeader{
			Section: "1",
			Date:    &date,
			Source:  "HiNIC v" + b.version,
			Manual:  "HiNIC Manual",
		},
		Path:             man,
		CommandSeparator: "-",
	})
	if err != nil {
		return nil, fmt.Errorf("pkg: man pages: %w", err)
	}
	pages, err := filepath.Glob(filepath.Join(man, "*.1"))
	if err != nil || len(pages) == 0 {
		return nil, fmt.Errorf("pkg: man pages: none generated")
	}
	slices.Sort(pages)
	for _, p := range pages {
		gz, err := gzipFile(p)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{Src: gz, Dst: ManDir + "/" + filepath.Base(gz), Mode: modeFile})
	}
	return entries, nil
}

// gzipFile compresses path to path.gz like gzip -9n: no name, no time.
func gzipFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(data); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return path + ".gz", os.WriteFile(path+".gz", buf.Bytes(), 0o644)
}

func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, sub := range c.Commands() {
		disableAutoGenTag(sub)
	}
}
