package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Initramfs is a busybox initramfs that QEMU tests fill with modules,
// programs and the shared libraries those load: files go under their
// absolute paths, each parent directory created once.
type Initramfs struct {
	W    *CPIO
	dirs map[string]bool
}

// initramfsDirs are the directories NewInitramfs creates.
var initramfsDirs = []string{"proc", "sys", "usr", "usr/bin", "usr/sbin", "sbin"}

// NewInitramfs starts an initramfs of busybox with init as /init and
// /dev, /bin, /proc, /sys, /usr/bin, /usr/sbin and /sbin.
func NewInitramfs(t testing.TB, busybox, init string) *Initramfs {
	t.Helper()
	w, err := BusyboxInitramfs(busybox, init, initramfsDirs...)
	if err != nil {
		t.Fatal(err)
	}
	r := &Initramfs{W: w, dirs: map[string]bool{"dev": true, "bin": true}}
	for _, d := range initramfsDirs {
		r.dirs[d] = true
	}
	return r
}

// Add adds a file of data at path.
func (r *Initramfs) Add(t testing.TB, path string, perm uint32, data []byte) {
	t.Helper()
	rel := strings.TrimPrefix(filepath.Clean(path), "/")
	var parents []string
	for d := filepath.Dir(rel); d != "." && !r.dirs[d]; d = filepath.Dir(d) {
		parents = append(parents, d)
	}
	for _, d := range slices.Backward(parents) {
		r.W.Dir(d)
		r.dirs[d] = true
	}
	r.W.File(rel, perm, data)
}

// AddFile adds the host's file hostPath at guestPath.
func (r *Initramfs) AddFile(t testing.TB, guestPath, hostPath string, perm uint32) {
	t.Helper()
	b, err := os.ReadFile(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	r.Add(t, guestPath, perm, b)
}

// AddLibs adds the shared libraries the binaries need, libgcc_s
// included: glibc opens it with dlopen to unwind a thread that calls
// pthread_exit, so ldd does not list it; without it such a process
// aborts.
func (r *Initramfs) AddLibs(t testing.TB, bins ...string) {
	t.Helper()
	libs := SharedLibs(t, bins...)
	for _, lib := range libs {
		r.AddFile(t, lib, lib, 0o755)
	}
	for _, lib := range libs {
		if filepath.Base(lib) != "libc.so.6" {
			continue
		}
		gcc := filepath.Join(filepath.Dir(lib), "libgcc_s.so.1")
		_, err := os.Stat(gcc)
		RequireTool(t, gcc, "apt-get install libgcc-s1", err == nil)
		r.AddFile(t, gcc, gcc, 0o755)
	}
}

// AddModules adds the Debian modules mods of kernel release with their
// dependencies, uncompressed, as /lib/modules/NAME.ko, and their load
// order in /lib/modules/load-order, which it returns too.
func (r *Initramfs) AddModules(t testing.TB, release string, mods ...string) []string {
	t.Helper()
	var order []string
	for _, m := range GuestModules(t, release, mods...) {
		name := ModuleName(m) + ".ko"
		r.Add(t, "/lib/modules/"+name, 0o644, ReadModule(t, filepath.Join("/lib/modules", release, m)))
		order = append(order, name)
	}
	r.Add(t, "/lib/modules/load-order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	return order
}

// GuestModules returns the modules of release that mods need, each after
// its dependencies (modules.dep), as paths relative to /lib/modules/release.
func GuestModules(t testing.TB, release string, mods ...string) []string {
	t.Helper()
	root := filepath.Join("/lib/modules", release)
	f, err := os.Open(filepath.Join(root, "modules.dep"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deps := map[string][]string{}
	byName := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[ModuleName(mod)] = mod
	}
	var order []string
	var visit func(string)
	visit = func(m string) {
		if slices.Contains(order, m) {
			return
		}
		for _, d := range deps[m] {
			visit(d)
		}
		order = append(order, m)
	}
	for _, name := range mods {
		m, ok := byName[name]
		if !ok {
			t.Fatalf("module %s not in %s/modules.dep", name, root)
		}
		visit(m)
	}
	return order
}

// ModuleName is the module name of a modules.dep path.
func ModuleName(path string) string {
	base := filepath.Base(path)
	base = base[:strings.Index(base, ".ko")]
	return strings.ReplaceAll(base, "-", "_")
}

// ReadModule returns the uncompressed object of a module file.
func ReadModule(t testing.TB, path string) []byte {
	t.Helper()
	var tool string
	switch {
	case strings.HasSuffix(path, ".ko"):
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case strings.HasSuffix(path, ".ko.xz"):
		tool = "xz"
	case strings.HasSuffix(path, ".ko.zst"):
		tool = "zstd"
	case strings.HasSuffix(path, ".ko.gz"):
		tool = "gzip"
	default:
		t.Fatalf("%s: unknown module compression", path)
	}
	b, err := exec.Command(tool, "-dc", path).Output()
	if err != nil {
		t.Fatalf("%s -dc %s: %v", tool, path, err)
	}
	return b
}

// SharedLibs returns the shared objects that the binaries load (ldd),
// the dynamic loader included, by the path they are loaded from.
func SharedLibs(t testing.TB, bins ...string) []string {
	t.Helper()
	var libs []string
	for _, b := range bins {
		out, err := exec.Command("ldd", b).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", b, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			var p string
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				p = f[2]
			case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
				p = f[0] // the loader
			}
			if p != "" && !slices.Contains(libs, p) {
				libs = append(libs, p)
			}
		}
	}
	return libs
}

// BuildModules builds the modules of kernel/Kbuild from a copy of the
// source directory src (the tree stays clean) against the headers of
// release and returns the directory of the built modules, failing the
// test unless each of want was built. With only set, the copy's Kbuild
// keeps the obj-m lines that name it (e.g. "hicain_net.o"). The Kbuild
// file has -Werror: a warning fails the build.
func BuildModules(t testing.TB, release, src, only string, want ...string) string {
	t.Helper()
	kdir := filepath.Join("/lib/modules", release, "build")
	_, err := os.Stat(filepath.Join(kdir, "Makefile"))
	RequireTool(t, "kernel headers "+kdir, "apt-get install linux-headers-"+release, err == nil)
	_, err = exec.LookPath("make")
	RequireTool(t, "make", "apt-get install make", err == nil)
	_, err = exec.LookPath("gcc")
	RequireTool(t, "gcc", "apt-get install gcc", err == nil)

	src, err = filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(src, "*.[ch]"))
	files = append(files, filepath.Join(src, "Kbuild"), filepath.Join(src, "Makefile"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if only != "" && filepath.Base(f) == "Kbuild" {
			var keep []string
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(l, "obj-m") || strings.Contains(l, only) {
					keep = append(keep, l)
				}
			}
			b = []byte(strings.Join(keep, "\n"))
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("make", "-C", kdir, "M="+dir, "modules").CombinedOutput()
	if err != nil {
		t.Fatalf("module build: %v\n%s", err, out)
	}
	for _, ko := range want {
		if _, err := os.Stat(filepath.Join(dir, ko)); err != nil {
			t.Fatalf("module build made no %s:\n%s", ko, out)
		}
	}
	return dir
}
