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
	"slices"
	"strconv"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
)

// The provider build contract (docs/packaging.md): `make -C rdma-core`
// leaves these two files, relative to rdma-core/.
const (
	// ProviderLib is the provider for libibverbs' private ABI 34
	// (IBVERBS_PRIVATE_34), the suffix libibverbs looks for.
	ProviderLib = "build/libhicain-rdmav34.so"
	// ProviderDriver is the libibverbs.d entry naming the provider.
	ProviderDriver = "hicain.driver"
)

// ProviderCFlags are the CFLAGS the provider is built with: Debian's
// hardening defaults (dpkg-buildflags; _FORTIFY_SOURCE comes from its
// CPPFLAGS, which a plain Makefile may not use), and a prefix map naming
// the build tree's top, so that its temporary path reaches no object and
// builds are reproducible.
func ProviderCFlags(top string) string {
	return "-g -O2 -fstack-protector-strong -D_FORTIFY_SOURCE=2 -ffile-prefix-map=" + top + "/="
}

// ProviderLDFlags are the LDFLAGS the provider is linked with (Debian's
// hardening: full RELRO, immediate binding).
const ProviderLDFlags = "-Wl,-z,relro -Wl,-z,now"

// NoteProviderAbsent is the note of a libhicain that was not built.
const NoteProviderAbsent = "not built: " + ProviderSrc + " is absent"

// provider builds libhicain, or says why not.
func (b *build) provider(ctx context.Context) (Result, error) {
	if _, err := os.Stat(filepath.Join(b.opts.Repo, ProviderSrc)); errors.Is(err, fs.ErrNotExist) {
		return Result{Package: NameProvider, Version: b.debVersion(), Arch: b.arch, Note: NoteProviderAbsent}, nil
	}
	triplet, err := multiarch()
	if err != nil {
		return Result{}, err
	}
	for _, tool := range []string{"make", "gcc", "strip", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Result{}, fmt.Errorf("pkg: %s not found: run `apt-get install make gcc binutils dpkg`", tool)
		}
	}
	// libibverbs-dev: the headers and libibverbs.so the provider builds
	// against; it pins libibverbs1 to its own version.
	if _, err := installedVersion(ctx, "libibverbs-dev"); err != nil {
		if !b.opts.Fix {
			return Result{}, fmt.Errorf("%w, or `hinic pkg build --fix` as root", err)
		}
		if err := b.aptInstall(ctx, NameProvider, "libibverbs-dev"); err != nil {
			return Result{}, err
		}
	}
	ibverbs, err := installedVersion(ctx, "libibverbs1")
	if err != nil {
		return Result{}, err
	}
	// The copy keeps the repository's layout, rdma-core/ beside kernel/,
	// so the provider can include the ABI headers of ../kernel, their one
	// source of truth.
	top, err := b.dir("provider", "tree")
	if err != nil {
		return Result{}, err
	}
	src := filepath.Join(top, ProviderDir)
	if err := copyTree(filepath.Join(b.opts.Repo, ProviderDir), src, "build", ProviderDriver); err != nil {
		return Result{}, fmt.Errorf("pkg: copying %s: %w", ProviderDir, err)
	}
	if _, err := b.kernelSources(filepath.Join(top, KernelDir)); err != nil {
		return Result{}, err
	}
	b.progress("%s: make -C %s (libibverbs1 %s)", NameProvider, ProviderDir, ibverbs)
	if err := b.run(ctx, src, nil, "make", "-C", src, "CFLAGS="+ProviderCFlags(top), "LDFLAGS="+ProviderLDFlags); err != nil {
		return Result{}, fmt.Errorf("pkg: building the provider: %w", err)
	}
	lib, driver := filepath.Join(src, ProviderLib), filepath.Join(src, ProviderDriver)
	for _, p := range []string{lib, driver} {
		if _, err := os.Stat(p); err != nil {
			rel, _ := filepath.Rel(src, p)
			return Result{}, fmt.Errorf("pkg: make -C %s made no %s/%s (docs/packaging.md, the provider build contract)", ProviderDir, ProviderDir, rel)
		}
	}
	if err := checkDriverFile(driver); err != nil {
		return Result{}, err
	}
	root, err := b.dir("provider", "root")
	if err != nil {
		return Result{}, err
	}
	staged := filepath.Join(root, filepath.Base(ProviderLib))
	// lintian: unstripped-binary-or-object is an error.
	if err := b.run(ctx, root, nil, "strip", "--strip-unneeded", "--remove-section=.comment", "-o", staged, lib); err != nil {
		return Result{}, fmt.Errorf("pkg: %w", err)
	}
	so, err := inspectSharedObject(staged)
	if err != nil {
		return Result{}, err
	}
	if !hasNeeded(so, "libibverbs.so.1") {
		return Result{}, fmt.Errorf("pkg: %s does not link libibverbs.so.1 (NEEDED: %v); a provider registers through libibverbs' private ABI", ProviderLib, so.Needed)
	}
	up := upstreamVersion(ibverbs)
	major, err := strconv.Atoi(strings.SplitN(up, ".", 2)[0])
	if err != nil {
		return Result{}, fmt.Errorf("pkg: libibverbs1 version %q has no numeric major version", ibverbs)
	}
	// The private provider ABI is only promised within one rdma-core
	// major version: pin the range the provider was built against.
	depends := []string{
		fmt.Sprintf("libibverbs1 (>= %s)", up),
		fmt.Sprintf("libibverbs1 (<< %d~)", major+1),
	}
	if so.GlibcVersion != "" {
		depends = append(depends, "libc6 (>= "+so.GlibcVersion+")")
	} else if hasNeeded(so, "libc.so.6") {
		depends = append(depends, "libc6")
	}
	stagedDriver := filepath.Join(root, ProviderDriver)
	if err := copyFile(driver, stagedDriver, modeFile); err != nil {
		return Result{}, err
	}
	return b.pack(debSpec{
		Name:    NameProvider,
		Arch:    b.arch,
		Section: "net",
		Description: "HiNIC userspace RDMA provider for libibverbs\n" +
			"The libibverbs provider of the HiNIC emulated RDMA NIC: with it, the stock " +
			"libibverbs (rdma-core), and every verbs application on top of it, drives the " +
			"hicain_ib kernel driver's devices. It is built for libibverbs1 " + up +
			" and its private provider ABI 34.",
		Depends: depends,
		Fields:  map[string]string{"Multi-Arch": "same"},
		Entries: []entry{
			{Src: staged, Dst: "/usr/lib/" + triplet + "/libibverbs/" + filepath.Base(ProviderLib), Mode: modeFile},
			{Src: stagedDriver, Dst: "/etc/libibverbs.d/" + ProviderDriver, Mode: modeFile, Type: files.TypeConfig},
		},
		Scripts: nfpm.Scripts{},
		Dir:     NameProvider,
	})
}

// checkDriverFile checks a libibverbs.d entry: libibverbs reads "driver
// NAME" lines and loads libNAME-rdmav34.so.
func checkDriverFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) == 2 && fields[0] == "driver" && fields[1] == "hicain" {
			return nil
		}
		return fmt.Errorf("pkg: %s/%s: line %q; want \"driver hicain\"", ProviderDir, ProviderDriver, sc.Text())
	}
	return fmt.Errorf("pkg: %s/%s has no \"driver hicain\" line", ProviderDir, ProviderDriver)
}

// installedVersion returns the installed version of a Debian package.
func installedVersion(ctx context.Context, pkg string) (string, error) {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", pkg).Output()
	st, v, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil || st != "installed" || v == "" {
		return "", fmt.Errorf("pkg: %s is not installed; the provider is built against it: run `apt-get install %s`", pkg, pkg)
	}
	return v, nil
}

// upstreamVersion strips the epoch and Debian revision: 1:44.0-2 -> 44.0.
func upstreamVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndexByte(v, '-'); i > 0 {
		v = v[:i]
	}
	return v
}

// copyTree copies the regular files, directories and symlinks under src
// to dst, keeping executable bits and skipping the top-level entries
// named in skip (earlier build output).
func copyTree(src, dst string, skip ...string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if slices.Contains(skip, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(modeFile)
			if info.Mode()&0o111 != 0 {
				mode = modeExec
			}
			return copyFile(path, target, mode)
		}
		return nil
	})
}
