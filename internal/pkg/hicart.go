package pkg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
)

// The HiGPU runtime's build contract (docs/packaging.md): `make -C
// hicart` builds these, relative to hicart/, from hicart/ and the two
// ABI headers of ../kernel.
const (
	HicartDir     = "hicart"
	HicartSoname  = "libhicart.so.1"
	HicartVersion = "1.0.0" // the library's own, of libhicart.so.1.0.0
	HicartLib     = "libhicart.so." + HicartVersion
	HicartHeader  = "include/hicart.h"
	HicartPC      = "hicart.pc"
)

// HicartTools are the programs of hicart-tools, with their man pages
// under hicart/man.
var HicartTools = []string{"hicart-smi", "hicart-bandwidth", "hicart-p2p", "hicart-allreduce", "hicart_test"}

// HicartKernelHeaders are the headers of kernel/ the runtime includes.
var HicartKernelHeaders = []string{"higpu_abi.h", "higpu_uapi.h", "hidev_abi.h"}

// NoteHicartAbsent is the note of a hicart package that was not built.
const NoteHicartAbsent = "not built: " + HicartDir + " is absent"

// hicartTree is the runtime built once for its three packages.
type hicartTree struct {
	done bool
	src  string // the built hicart/ copy
	err  error
}

// hicartBuild builds hicart/ in the stage, once for all its packages.
func (b *build) hicartBuild(ctx context.Context) (string, error) {
	if b.hicart.done {
		return b.hicart.src, b.hicart.err
	}
	b.hicart.done = true
	b.hicart.src, b.hicart.err = b.hicartMake(ctx)
	return b.hicart.src, b.hicart.err
}

func (b *build) hicartMake(ctx context.Context) (string, error) {
	for _, tool := range []string{"make", "gcc", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("pkg: %s not found: run `apt-get install make gcc binutils`", tool)
		}
	}
	top, err := b.dir("hicart", "tree")
	if err != nil {
		return "", err
	}
	// The copy keeps hicart/ beside kernel/: the runtime includes the
	// ABI headers of ../kernel, their one source of truth.
	src := filepath.Join(top, HicartDir)
	if err := copyTree(filepath.Join(b.opts.Repo, HicartDir), src); err != nil {
		return "", fmt.Errorf("pkg: copying %s: %w", HicartDir, err)
	}
	for _, h := range HicartKernelHeaders {
		if err := copyFile(filepath.Join(b.opts.Repo, KernelDir, h), filepath.Join(top, KernelDir, h), modeFile); err != nil {
			return "", fmt.Errorf("pkg: %s needs %s/%s: %w", HicartDir, KernelDir, h, err)
		}
	}
	b.progress("%s: make -C %s clean all", NameHicart, HicartDir)
	if err := b.run(ctx, src, nil, "make", "-C", src, "clean", "all", "PREFIX=/usr",
		"CFLAGS="+ProviderCFlags(top), "LDFLAGS="+ProviderLDFlags); err != nil {
		return "", fmt.Errorf("pkg: building %s: %w", HicartDir, err)
	}
	for _, p := range append([]string{HicartLib, HicartHeader, HicartPC}, HicartTools...) {
		if _, err := os.Stat(filepath.Join(src, p)); err != nil {
			return "", fmt.Errorf("pkg: make -C %s made no %s/%s (docs/packaging.md, the hicart build contract)", HicartDir, HicartDir, p)
		}
	}
	return src, nil
}

// hicartAbsent reports whether the checkout has no hicart/.
func (b *build) hicartAbsent() bool {
	_, err := os.Stat(filepath.Join(b.opts.Repo, HicartDir))
	return errors.Is(err, fs.ErrNotExist)
}

// stripped strips the program or library src into the stage as name.
func (b *build) stripped(ctx context.Context, pkgName, src, name string) (string, error) {
	root, err := b.dir(pkgName, "root")
	if err != nil {
		return "", err
	}
	staged := filepath.Join(root, name)
	// lintian: unstripped-binary-or-object is an error.
	if err := b.run(ctx, root, nil, "strip", "--strip-unneeded", "--remove-section=.comment", "-o", staged, src); err != nil {
		return "", fmt.Errorf("pkg: %w", err)
	}
	return staged, nil
}

// libcDepends is the libc6 dependency of an ELF object.
func libcDepends(so sharedObject) []string {
	if so.GlibcVersion != "" {
		return []string{"libc6 (>= " + so.GlibcVersion + ")"}
	}
	if hasNeeded(so, "libc.so.6") {
		return []string{"libc6"}
	}
	return nil
}

// hicartAbsentResult is the result of a HiGPU runtime package that is
// not built because the tree has no hicart sources.
func (b *build) hicartAbsentResult(name string) Result {
	return Result{Package: name, Version: b.debVersion(), Arch: b.arch, Note: NoteHicartAbsent}
}

// hicartLibSource builds the hicart tree for a package that installs into
// the multiarch library directory, and returns the tree and that directory.
func (b *build) hicartLibSource(ctx context.Context) (src, libdir string, err error) {
	triplet, err := multiarch()
	if err != nil {
		return "", "", err
	}
	src, err = b.hicartBuild(ctx)
	if err != nil {
		return "", "", err
	}
	return src, "/usr/lib/" + triplet, nil
}

// hicartLib builds libhicart1: the shared library and its soname link,
// with the shlibs file dpkg-shlibdeps reads and the ldconfig trigger.
func (b *build) hicartLib(ctx context.Context) (Result, error) {
	if b.hicartAbsent() {
		return b.hicartAbsentResult(NameHicart), nil
	}
	src, libdir, err := b.hicartLibSource(ctx)
	if err != nil {
		return Result{}, err
	}
	staged, err := b.stripped(ctx, NameHicart, filepath.Join(src, HicartLib), HicartLib)
	if err != nil {
		return Result{}, err
	}
	so, err := inspectSharedObject(staged)
	if err != nil {
		return Result{}, err
	}
	return b.pack(debSpec{
		Name:    NameHicart,
		Arch:    b.arch,
		Section: "libs",
		Description: "HiGPU runtime library\n" +
			"libhicart drives HiGPU, the virtual GPU of HiNIC, through the higpu kernel " +
			"driver's /dev/higpuN devices. Its API is shaped like the CUDA runtime's " +
			"(devices, memory, copies, streams, events, built-in fill and reduce kernels), " +
			"so that porting a program is a rename.",
		Depends: libcDepends(so),
		Fields:  map[string]string{"Multi-Arch": "same"},
		Entries: []entry{
			{Src: staged, Dst: libdir + "/" + HicartLib, Mode: modeFile},
			{Src: HicartLib, Dst: libdir + "/" + HicartSoname, Type: files.TypeSymlink},
		},
		Triggers: nfpm.DebTriggers{ActivateNoAwait: []string{"ldconfig"}},
		// dpkg-shlibdeps: programs linked with libhicart.so.1 depend on
		// this package at this version or later.
		Control: map[string]string{"shlibs": "libhicart 1 " + NameHicart + " (>= " + b.version + ")\n"},
		Dir:     NameHicart,
	})
}

// hicartDev builds libhicart-dev: header, link-time symlink, pkg-config
// file and the hicart(3) man page.
func (b *build) hicartDev(ctx context.Context) (Result, error) {
	if b.hicartAbsent() {
		return b.hicartAbsentResult(NameHicartDev), nil
	}
	src, libdir, err := b.hicartLibSource(ctx)
	if err != nil {
		return Result{}, err
	}
	man, err := b.stagedMan(NameHicartDev, filepath.Join(src, "man", "hicart.3"))
	if err != nil {
		return Result{}, err
	}
	return b.pack(debSpec{
		Name:    NameHicartDev,
		Arch:    b.arch,
		Section: "libdevel",
		Description: "HiGPU runtime library (development files)\n" +
			"The header hicart.h, the libhicart.so link and the pkg-config file hicart.pc " +
			"for building programs with libhicart, the CUDA-runtime-shaped library of the " +
			"HiNIC HiGPU virtual GPU, and its manual page hicart(3).",
		Depends: []string{NameHicart + " (= " + b.debVersion() + ")"},
		Fields:  map[string]string{"Multi-Arch": "same"},
		Entries: []entry{
			{Src: filepath.Join(src, HicartHeader), Dst: "/usr/include/hicart.h", Mode: modeFile},
			{Src: HicartSoname, Dst: libdir + "/libhicart.so", Type: files.TypeSymlink},
			{Src: filepath.Join(src, HicartPC), Dst: libdir + "/pkgconfig/" + HicartPC, Mode: modeFile},
			{Src: man, Dst: "/usr/share/man/man3/hicart.3.gz", Mode: modeFile},
		},
		Dir: NameHicartDev,
	})
}

// hicartTools builds hicart-tools: hicart-smi, hicart-bandwidth,
// hicart-p2p, hicart-allreduce and hicart_test with their man pages.
func (b *build) hicartTools(ctx context.Context) (Result, error) {
	if b.hicartAbsent() {
		return b.hicartAbsentResult(NameHicartTools), nil
	}
	src, err := b.hicartBuild(ctx)
	if err != nil {
		return Result{}, err
	}
	depends := []string{NameHicart + " (>= " + b.version + ")"}
	var entries []entry
	for _, tool := range HicartTools {
		staged, err := b.stripped(ctx, NameHicartTools, filepath.Join(src, tool), tool)
		if err != nil {
			return Result{}, err
		}
		so, err := inspectSharedObject(staged)
		if err != nil {
			return Result{}, err
		}
		if !hasNeeded(so, HicartSoname) {
			return Result{}, fmt.Errorf("pkg: %s does not link %s (NEEDED: %v)", tool, HicartSoname, so.Needed)
		}
		for _, d := range libcDepends(so) {
			if !slices.Contains(depends, d) {
				depends = append(depends, d)
			}
		}
		man, err := b.stagedMan(NameHicartTools, filepath.Join(src, "man", tool+".1"))
		if err != nil {
			return Result{}, err
		}
		entries = append(entries,
			entry{Src: staged, Dst: "/usr/bin/" + tool, Mode: modeExec},
			entry{Src: man, Dst: "/usr/share/man/man1/" + tool + ".1.gz", Mode: modeFile})
	}
	return b.pack(debSpec{
		Name:    NameHicartTools,
		Arch:    b.arch,
		Section: "utils",
		Description: "HiGPU command-line tools\n" +
			"hicart-smi lists the HiGPU virtual GPUs of a HiNIC guest with their memory, " +
			"utilisation and processes, and their HiLink topology; hicart-bandwidth measures " +
			"copy bandwidth against the host memcpy ceiling; hicart-p2p measures peer copy " +
			"bandwidth and latency over HiLink between every pair of GPUs; hicart-allreduce " +
			"runs a checked ring all-reduce over the GPUs of several guests; hicart_test " +
			"checks the runtime, driver and device together, with TAP output.",
		Depends: depends,
		Entries: entries,
		Dir:     NameHicartTools,
	})
}

// stagedMan copies a man page into the stage, compressed like gzip -9n.
func (b *build) stagedMan(pkgName, src string) (string, error) {
	dir, err := b.dir(pkgName, "man")
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := copyFile(src, dst, modeFile); err != nil {
		return "", fmt.Errorf("pkg: %w", err)
	}
	return gzipFile(dst)
}
