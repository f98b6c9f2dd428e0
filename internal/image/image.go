// Package image builds HiNIC's Debian 12 guest images without loop mounts:
// a root file system made by mmdebstrap from Debian's packages, turned into
// a whole-disk ext4 image with `mke2fs -d` and a qcow2 with `qemu-img
// convert`, plus the kernel and initramfs extracted for direct boot
// (-kernel/-initrd/-append). A manifest (JSON) next to the artifacts records
// the kernel version, every package with its version, sizes, sha256 of every
// artifact and the kernel command line. An unchanged spec is not rebuilt.
//
// image runs host tools (mmdebstrap, mke2fs, qemu-img) as child processes;
// it imports no other HiNIC package but nothing of the CLI.
package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// recipeVersion changes whenever the way an image is made changes, so that
// cached images built by an older recipe are rebuilt.
const recipeVersion = "2"

// BasePackages are installed in every image besides the kernel.
var BasePackages = []string{
	"systemd-sysv", "udev", "kmod", "openssh-server", "openssh-client",
	"iproute2", "iputils-ping", "procps",
	"rdma-core", "ibverbs-utils", "ibverbs-providers", "perftest",
	"infiniband-diags", "opensm", "python3-pyverbs", "rdmacm-utils",
	// The consumers the gate runs across guests (docs/verify.md): UCX,
	// libfabric and Open MPI, with mpicc (and the gcc it drives) for the
	// gate's MPI programs.
	"ucx-utils", "libfabric-bin", "openmpi-bin", "libopenmpi-dev", "gcc",
}

// Artifact file names inside an image directory.
const (
	FileQcow2    = "root.qcow2"
	FileKernel   = "vmlinuz"
	FileInitrd   = "initrd.img"
	FileManifest = "manifest.json"
	FileLog      = "build.log"
)

// Spec says what goes into an image. Its canonical JSON is the cache key.
type Spec struct {
	Name     string   `json:"name"`
	Suite    string   `json:"suite"`
	Mirrors  []string `json:"mirrors"`  // sources lines ("deb URI SUITE COMPONENTS")
	Kernel   string   `json:"kernel"`   // exact package, e.g. linux-image-6.1.0-57-amd64
	Packages []string `json:"packages"` // besides the kernel
	Debs     []string `json:"debs"`     // sha256:path of extra .deb files
	Size     string   `json:"size"`     // ext4 size, e.g. "3G"
	// AuthorizedKey, if set, is baked into /root/.ssh/authorized_keys. Leave
	// it empty to pass the key at boot as a systemd credential instead.
	AuthorizedKey string `json:"authorized_key,omitempty"`
	Recipe        string `json:"recipe"`
}

// Key is the cache key of a spec: the sha256 of its canonical JSON.
func (s Spec) Key() string {
	s.Recipe = recipeVersion
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Artifact is one file of a built image.
type Artifact struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Package is one installed Debian package.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Manifest describes a built image. It is written as manifest.json.
type Manifest struct {
	Name          string     `json:"name"`
	Key           string     `json:"key"`
	Built         time.Time  `json:"built"`
	BuildSeconds  float64    `json:"build_seconds"`
	Suite         string     `json:"suite"`
	Mirrors       []string   `json:"mirrors"`
	KernelPackage string     `json:"kernel_package"`
	KernelRelease string     `json:"kernel_release"` // uname -r in the guest
	KernelVersion string     `json:"kernel_version"` // the Debian package version
	Cmdline       string     `json:"cmdline"`
	BootCommand   []string   `json:"boot_command"`
	RootfsBytes   int64      `json:"rootfs_bytes"`
	Artifacts     []Artifact `json:"artifacts"`
	Packages      []Package  `json:"packages"`
	Spec          Spec       `json:"spec"`
}

// Cmdline is the kernel command line of every image; per-guest additions
// (hostname) are appended at deploy time.
const Cmdline = "root=/dev/vda rw console=ttyS0 net.ifnames=1 quiet"

// ReadManifest reads DIR/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileManifest))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("image: %s: %w", filepath.Join(dir, FileManifest), err)
	}
	return &m, nil
}

// Verify checks that every artifact of the manifest exists in dir with its
// recorded size (and, with full, its sha256).
func (m *Manifest) Verify(dir string, full bool) error {
	for _, a := range m.Artifacts {
		p := filepath.Join(dir, a.Name)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Size() != a.Size {
			return fmt.Errorf("image: %s: size %d, manifest says %d", p, st.Size(), a.Size)
		}
		if full {
			sum, err := FileSHA256(p)
			if err != nil {
				return err
			}
			if sum != a.SHA256 {
				return fmt.Errorf("image: %s: sha256 %s, manifest says %s", p, sum, a.SHA256)
			}
		}
	}
	return nil
}

// Tool is a host program the build needs and the package that provides it.
type Tool struct {
	Name    string
	Package string
	Purpose string
}

// Tools are the host prerequisites of image build, deploy and the SSH gate.
var Tools = []Tool{
	{"mmdebstrap", "mmdebstrap", "image build: the root file system"},
	{"mke2fs", "e2fsprogs", "image build: ext4 without mounts"},
	{"qemu-img", "qemu-utils", "image build and deploy: qcow2 images and overlays"},
	{"qemu-system-x86_64", "qemu-system-x86", "deploy: the guests"},
	{"apt-cache", "apt", "image build: resolving the kernel version"},
}

// LookTool finds a tool on PATH or in /sbin and /usr/sbin, which are not on
// a normal user's PATH but hold mke2fs.
func LookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// MissingTools returns the tools among names that are not installed.
func MissingTools(names ...string) []Tool {
	var out []Tool
	for _, t := range Tools {
		if len(names) > 0 && !contains(names, t.Name) {
			continue
		}
		if _, err := LookTool(t.Name); err != nil {
			out = append(out, t)
		}
	}
	return out
}

// ErrMissingTools says which host tools are missing and how to get them.
type ErrMissingTools []Tool

func (e ErrMissingTools) Error() string {
	var names, pkgs []string
	for _, t := range e {
		names = append(names, t.Name)
		pkgs = append(pkgs, t.Package)
	}
	return fmt.Sprintf("missing host tools: %s; run `hinic doctor --fix` or `apt-get install %s`",
		strings.Join(names, ", "), strings.Join(pkgs, " "))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// HostMirrors returns the Debian sources the host's apt uses, as
// one-line "deb URI SUITE COMPONENTS" entries, keeping only the suites of
// release (e.g. bookworm, bookworm-updates, bookworm-security). It reads
// /etc/apt/sources.list and the deb822 files under /etc/apt/sources.list.d.
func HostMirrors(root, release string) ([]string, error) {
	var out []string
	add := func(uri, suite string, comps []string) {
		if suite != release && !strings.HasPrefix(suite, release+"-") {
			return
		}
		line := fmt.Sprintf("deb %s %s %s", uri, suite, strings.Join(comps, " "))
		if !contains(out, line) {
			out = append(out, line)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/apt/sources.list")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 4 || f[0] != "deb" {
				continue
			}
			i := 1
			if strings.HasPrefix(f[1], "[") {
				for i < len(f) && !strings.HasSuffix(f[i], "]") {
					i++
				}
				i++
			}
			if i+2 <= len(f)-1 {
				add(f[i], f[i+1], f[i+2:])
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "etc/apt/sources.list.d/*.sources"))
	sort.Strings(files)
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err != nil {
			return nil, err
		}
		for _, stanza := range strings.Split(string(b), "\n\n") {
			kv := map[string]string{}
			for _, l := range strings.Split(stanza, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "#") {
					continue
				}
				if k, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, " ") {
					kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
				}
			}
			if !contains(strings.Fields(kv["types"]), "deb") || strings.EqualFold(kv["enabled"], "no") {
				continue
			}
			for _, uri := range strings.Fields(kv["uris"]) {
				for _, suite := range strings.Fields(kv["suites"]) {
					add(uri, suite, strings.Fields(kv["components"]))
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image: no %s sources in the host's apt configuration; pass --mirror", release)
	}
	return out, nil
}

var kernelDep = regexp.MustCompile(`(?m)Depends: (linux-image-[0-9][^\s]*-amd64)\s*$`)

// ResolveKernel returns the exact kernel package (linux-image-6.1.0-N-amd64)
// that linux-image-amd64 currently depends on in the host's apt lists, which
// come from the same suites the image is built from.
func ResolveKernel(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("image: apt-cache depends linux-image-amd64: %w (run apt-get update, or pass --kernel)", err)
	}
	m := kernelDep.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("image: apt-cache does not know linux-image-amd64's kernel; run apt-get update or pass --kernel")
	}
	return string(m[1]), nil
}

// FileSHA256 is the hex sha256 of a file's bytes.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ParseDpkgStatus reads name/version pairs of installed packages from a
// dpkg status file.
func ParseDpkgStatus(r io.Reader) ([]Package, error) {
	var out []Package
	var name, version, status string
	flush := func() {
		if name != "" && strings.HasSuffix(status, " installed") {
			out = append(out, Package{Name: name, Version: version})
		}
		name, version, status = "", "", ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, "Package: "):
			name = strings.TrimPrefix(l, "Package: ")
		case strings.HasPrefix(l, "Version: "):
			version = strings.TrimPrefix(l, "Version: ")
		case strings.HasPrefix(l, "Status: "):
			status = strings.TrimPrefix(l, "Status: ")
		}
	}
	flush()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, sc.Err()
}

var errNoKernel = errors.New("image: no /boot/vmlinuz-* in the root file system")
