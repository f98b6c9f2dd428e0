package pkg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/goreleaser/nfpm/v2"
)

// DKMSName is the DKMS module name (PACKAGE_NAME in dkms.conf) and the
// directory under /lib/modules/KVER/updates of the prebuilt modules.
const DKMSName = "hicain"

// KbuildModules returns the modules kernel/Kbuild builds: every name.o
// of an obj-m line (obj-m += a.o b.o, obj-m := a.o), in order. A module
// added to Kbuild is packaged with no other change.
func KbuildModules(repo string) ([]string, error) {
	path := filepath.Join(repo, KernelDir, "Kbuild")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pkg: %w", err)
	}
	// Join continuation lines first.
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	var mods []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		m := objM.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, obj := range strings.Fields(m[1]) {
			name, ok := strings.CutSuffix(obj, ".o")
			if !ok || !moduleName.MatchString(name) {
				return nil, fmt.Errorf("pkg: %s: obj-m entry %q is not a module object (name.o)", path, obj)
			}
			if !slices.Contains(mods, name) {
				mods = append(mods, name)
			}
		}
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("pkg: %s lists no obj-m modules", path)
	}
	for _, m := range mods {
		// Linux's own hinic driver would be shadowed by an updates/
		// module of that name (docs/packaging.md).
		if strings.HasPrefix(m, "hinic") {
			return nil, fmt.Errorf("pkg: %s: module %q clashes with Linux's hinic driver; HiNIC modules are hicain_*", path, m)
		}
	}
	return mods, nil
}

var (
	objM       = regexp.MustCompile(`^\s*obj-m\s*[:+]?=\s*(.*)$`)
	moduleName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// isKernelSource reports whether a file of kernel/ is module source that
// DKMS needs, as opposed to build output lying in a developer's tree.
func isKernelSource(name string) bool {
	switch name {
	case "Kbuild", "Makefile":
		return true
	}
	if strings.HasSuffix(name, ".mod.c") {
		return false
	}
	ext := filepath.Ext(name)
	return ext == ".c" || ext == ".h" || ext == ".S"
}

// kernelSources copies the module sources of kernel/ into dst and returns
// their paths relative to dst, sorted.
func (b *build) kernelSources(dst string) ([]string, error) {
	src := filepath.Join(b.opts.Repo, KernelDir)
	var rels []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || !isKernelSource(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		rels = append(rels, rel)
		return copyFile(path, filepath.Join(dst, rel), modeFile)
	})
	if err != nil {
		return nil, fmt.Errorf("pkg: kernel sources: %w", err)
	}
	slices.Sort(rels)
	return rels, nil
}

// HeadersDir is where the build tree of kernel release kver is.
func HeadersDir(kver string) string { return filepath.Join("/lib/modules", kver, "build") }

// HeadersPackage is the Debian package with kver's headers.
func HeadersPackage(kver string) string { return "linux-headers-" + kver }

// ErrNoHeaders is wrapped when the kernel's headers are not installed.
var ErrNoHeaders = errors.New("kernel headers not installed")

// ensureHeaders checks for kver's build tree and, with Fix, installs it.
func (b *build) ensureHeaders(ctx context.Context) error {
	kver := b.opts.Kernel
	if _, err := os.Stat(filepath.Join(HeadersDir(kver), "Makefile")); err == nil {
		return nil
	}
	pkg := HeadersPackage(kver)
	if !b.opts.Fix {
		return fmt.Errorf("pkg: %w for %s (%s has no Makefile): run `apt-get install %s`, or `hinic pkg build --fix` as root",
			ErrNoHeaders, kver, HeadersDir(kver), pkg)
	}
	if err := b.aptInstall(ctx, NameModules, pkg); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(HeadersDir(kver), "Makefile")); err != nil {
		return fmt.Errorf("pkg: %w for %s even after installing %s", ErrNoHeaders, kver, pkg)
	}
	return nil
}

// aptInstall installs Debian packages with apt-get, as --fix asks.
func (b *build) aptInstall(ctx context.Context, step string, pkgs ...string) error {
	list := strings.Join(pkgs, " ")
	if os.Geteuid() != 0 {
		return fmt.Errorf("pkg: --fix needs root to install %s; run `sudo apt-get install %s`", list, list)
	}
	b.progress("%s: installing %s", step, list)
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)} {
		if err := b.run(ctx, "", []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", args...); err != nil {
			return fmt.Errorf("pkg: apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// modules builds hicain-modules-KVER.
func (b *build) modules(ctx context.Context) (Result, error) {
	kver := b.opts.Kernel
	mods, err := KbuildModules(b.opts.Repo)
	if err != nil {
		return Result{}, err
	}
	if err := b.ensureHeaders(ctx); err != nil {
		return Result{}, err
	}
	for _, tool := range []string{"make", "gcc", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Result{}, fmt.Errorf("pkg: %s not found: run `apt-get install make gcc binutils`", tool)
		}
	}
	src, err := b.dir("modules", "src")
	if err != nil {
		return Result{}, err
	}
	if _, err := b.kernelSources(src); err != nil {
		return Result{}, err
	}
	// The build directory is a temporary path; map it to the path DKMS
	// installs the same sources at, so that no temporary name reaches
	// the objects (__FILE__, debug info, and through them the build ID).
	kcflags := "-ffile-prefix-map=" + src + "/=" + b.dkmsSourceDir() + "/"
	b.progress("%s: make -C %s M=... modules (%s)", NameModules, HeadersDir(kver), strings.Join(mods, ", "))
	if err := b.run(ctx, src, nil, "make", "-C", HeadersDir(kver), "M="+src, "KCFLAGS="+kcflags, "modules"); err != nil {
		return Result{}, fmt.Errorf("pkg: building the modules for %s: %w", kver, err)
	}

	name := NameModules + "-" + kver
	root, err := b.dir("modules", "root")
	if err != nil {
		return Result{}, err
	}
	var entries []entry
	for _, m := range mods {
		ko := filepath.Join(src, m+".ko")
		if _, err := os.Stat(ko); err != nil {
			return Result{}, fmt.Errorf("pkg: Kbuild lists %s.o but the build made no %s.ko", m, m)
		}
		staged := filepath.Join(root, m+".ko")
		// dh_strip's treatment of kernel modules: debug info out, symbols
		// the module loader needs kept.
		if err := b.run(ctx, root, nil, "strip", "--strip-debug", "--remove-section=.comment", "-o", staged, ko); err != nil {
			return Result{}, fmt.Errorf("pkg: %w", err)
		}
		if err := checkVermagic(staged, kver); err != nil {
			return Result{}, err
		}
		entries = append(entries, entry{Src: staged, Dst: "/lib/modules/" + kver + "/updates/" + DKMSName + "/" + m + ".ko", Mode: modeFile})
	}
	load := filepath.Join(root, "modules-load.conf")
	text := "# Load the HiNIC guest drivers at boot (hicain-modules-" + kver + ").\n" + strings.Join(mods, "\n") + "\n"
	if err := os.WriteFile(load, []byte(text), 0o644); err != nil {
		return Result{}, err
	}
	// Named after the kernel: packages for two kernels can be installed
	// side by side.
	entries = append(entries, entry{Src: load, Dst: "/usr/lib/modules-load.d/hicain-" + kver + ".conf", Mode: modeFile})

	vars := map[string]string{"KVER": kver}
	postinst, err := b.script(NameModules, "postinst", vars)
	if err != nil {
		return Result{}, err
	}
	postrm, err := b.script(NameModules, "postrm", vars)
	if err != nil {
		return Result{}, err
	}
	return b.pack(debSpec{
		Name:    name,
		Arch:    b.arch,
		Section: "kernel",
		Description: "HiNIC guest kernel modules for Linux " + kver + "\n" +
			"The drivers of the HiNIC emulated RDMA NIC and HiGPU virtual GPU (" + strings.Join(mods, ", ") + "), " +
			"prebuilt for the kernel " + kver + " only and installed under /lib/modules/" + kver +
			"/updates. They drive the QEMU ivshmem-doorbell functions that hinic device serve " +
			"and hinic gpu serve emulate the NIC and the GPU behind. For other kernels install hicain-dkms instead.",
		Depends:   []string{"linux-image-" + kver},
		Provides:  []string{NameModules},
		Conflicts: []string{NameDKMS},
		Entries:   entries,
		Scripts:   nfpm.Scripts{PostInstall: postinst, PostRemove: postrm},
		Dir:       NameModules,
	})
}

// checkVermagic fails when a module was not built for kver: its vermagic
// must start with the release, or the kernel refuses to load it.
func checkVermagic(ko, kver string) error {
	info, err := ModInfo(ko)
	if err != nil {
		return err
	}
	vm := info["vermagic"]
	if !strings.HasPrefix(vm, kver+" ") {
		return fmt.Errorf("pkg: %s has vermagic %q, not for kernel %s", filepath.Base(ko), vm, kver)
	}
	return nil
}

// dkmsSourceDir is where hicain-dkms installs the module sources.
func (b *build) dkmsSourceDir() string { return "/usr/src/" + DKMSName + "-" + b.version }

// DKMSConf returns the dkms.conf of the modules.
func DKMSConf(version string, mods []string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "PACKAGE_NAME=%q\nPACKAGE_VERSION=%q\n", DKMSName, version)
	for i, m := range mods {
		fmt.Fprintf(&s, "BUILT_MODULE_NAME[%d]=%q\nDEST_MODULE_LOCATION[%d]=\"/updates/dkms\"\n", i, m, i)
	}
	// Kbuild alone says what to build; kernel/Makefile is for people.
	s.WriteString(`MAKE[0]="make -C ${kernel_source_dir} M=${dkms_tree}/${PACKAGE_NAME}/${PACKAGE_VERSION}/build modules"
CLEAN="make -C ${kernel_source_dir} M=${dkms_tree}/${PACKAGE_NAME}/${PACKAGE_VERSION}/build clean"
AUTOINSTALL="yes"
`)
	return s.String()
}

// dkms builds hicain-dkms.
func (b *build) dkms(ctx context.Context) (Result, error) {
	mods, err := KbuildModules(b.opts.Repo)
	if err != nil {
		return Result{}, err
	}
	src, err := b.dir("dkms", "src")
	if err != nil {
		return Result{}, err
	}
	rels, err := b.kernelSources(src)
	if err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(src, "dkms.conf"), []byte(DKMSConf(b.version, mods)), 0o644); err != nil {
		return Result{}, err
	}
	rels = append(rels, "dkms.conf")
	var entries []entry
	for _, rel := range rels {
		entries = append(entries, entry{Src: filepath.Join(src, rel), Dst: b.dkmsSourceDir() + "/" + filepath.ToSlash(rel), Mode: modeFile})
	}
	vars := map[string]string{"VERSION": b.version}
	postinst, err := b.script(NameDKMS, "postinst", vars)
	if err != nil {
		return Result{}, err
	}
	prerm, err := b.script(NameDKMS, "prerm", vars)
	if err != nil {
		return Result{}, err
	}
	return b.pack(debSpec{
		Name:    NameDKMS,
		Arch:    "all",
		Section: "kernel",
		Description: "HiNIC guest kernel modules, sources for DKMS\n" +
			"The drivers of the HiNIC emulated RDMA NIC and HiGPU virtual GPU (" + strings.Join(mods, ", ") + ") as sources. " +
			"DKMS builds and installs them for every installed kernel that has its " +
			"linux-headers package, now and whenever a new kernel is installed. They drive " +
			"QEMU's ivshmem-doorbell function that hinic device serve emulates the NIC behind.",
		Depends: []string{"dkms (>= 2.1.0.0)"},
		Fields:  map[string]string{"Multi-Arch": "foreign"},
		Entries: entries,
		Scripts: nfpm.Scripts{PostInstall: postinst, PreRemove: prerm},
		Dir:     NameDKMS,
	})
}
