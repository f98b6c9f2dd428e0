package pkg_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/pkg"
	"github.com/PacketFive/hinic/internal/testutil"
)

// repoRoot is the checkout these tests package, two levels up.
var repoRoot = filepath.Join("..", "..")

// The fixed inputs of the shared build.
const (
	testVersion = "1.2.3"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var testEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testProviderMakefile and testProviderC are a provider that keeps the
// build contract of docs/packaging.md: `make -C rdma-core` leaves
// build/libhicain-rdmav34.so and hicain.driver. The library is real: gcc
// builds it, it links libibverbs.so.1 and imports the private provider
// ABI's registration function, as a provider does.
const testProviderMakefile = `CC = gcc
CFLAGS ?= -O2
LIBIBVERBS = /usr/lib/$(shell $(CC) -print-multiarch)/libibverbs.so.1
PROVIDER_CFLAGS = -fPIC -Wall -Werror -I../kernel

all: build/libhicain-rdmav34.so hicain.driver

build/libhicain-rdmav34.so: providers/hicain/hicain.c ../kernel/hicain_test.h
	mkdir -p build
	$(CC) $(CFLAGS) $(PROVIDER_CFLAGS) -shared -o $@ $< $(LDFLAGS) -Wl,--no-as-needed $(LIBIBVERBS) -lc

hicain.driver:
	echo 'driver hicain' > $@

.PHONY: all
`

const testProviderC = `#include <stdio.h>
#include <string.h>
#include "hicain_test.h"

/* rdma-core's util/verbs_register_driver for IBVERBS_PRIVATE_34. */
struct verbs_device_ops;
extern void verbs_register_driver_34(const struct verbs_device_ops *ops);

static char hicain_name[64];

void hicain_test_register(const struct verbs_device_ops *ops, const char *name)
{
	snprintf(hicain_name, sizeof(hicain_name), "%s", name);
	if (strlen(hicain_name) > HICAIN_TEST_OK)
		verbs_register_driver_34(ops);
}
`

// testKbuild and testModuleC are two small modules in the shape of
// kernel/: the shared build packages them, so that the packaging tests
// do not depend on the state of the drivers' own sources (which
// TestRealKernelModules builds). Two obj-m entries show that every module
// Kbuild lists is packaged; hicain_ib, as in kernel/, is built from
// objects of other names (hicain_ib-y), and has no hicain_ib.c.
const testKbuild = `ccflags-y += -Werror
obj-m += hicain_net.o
obj-m += hicain_ib.o
hicain_ib-y := hicain_ib_main.o
`

const testModuleC = `// SPDX-License-Identifier: GPL-2.0
#include <linux/module.h>
#include "hicain_test.h"

static int __init hicain_init(void)
{
	pr_info("%s: loaded from %s\n", KBUILD_MODNAME, __FILE__);
	return HICAIN_TEST_OK;
}

static void __exit hicain_exit(void)
{
}

module_init(hicain_init);
module_exit(hicain_exit);
MODULE_DESCRIPTION("HiNIC packaging test module");
MODULE_LICENSE("GPL");
`

// withTestModules replaces the kernel/ of a test checkout with the test
// modules.
func withTestModules(t testing.TB, repo string) {
	t.Helper()
	kdir := filepath.Join(repo, "kernel")
	if err := os.RemoveAll(kdir); err != nil {
		t.Fatal(err)
	}
	// The HiGPU runtime includes the real ABI headers.
	for _, h := range pkg.HicartKernelHeaders {
		copyTestFile(t, filepath.Join(repoRoot, "kernel", h), filepath.Join(kdir, h))
	}
	writeTestFile(t, filepath.Join(kdir, "Kbuild"), testKbuild)
	writeTestFile(t, filepath.Join(kdir, "Makefile"), "KDIR ?= /lib/modules/$(shell uname -r)/build\nmodules:\n\t$(MAKE) -C $(KDIR) M=$(CURDIR) modules\n")
	writeTestFile(t, filepath.Join(kdir, "hicain_test.h"), "/* SPDX-License-Identifier: GPL-2.0 */\n#define HICAIN_TEST_OK 0\n")
	writeTestFile(t, filepath.Join(kdir, "hicain_net.c"), testModuleC)
	writeTestFile(t, filepath.Join(kdir, "hicain_ib_main.c"), testModuleC)
}

// newRepo copies what pkg builds from (Go sources, kernel/, packaging/,
// the rack examples) into a temporary checkout, so that a build is not
// disturbed by edits to the working tree while it runs. withProvider adds
// the test-only provider under rdma-core/.
func newRepo(t testing.TB, dir string, withProvider bool) string {
	t.Helper()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyTestFile(t, filepath.Join(repoRoot, f), filepath.Join(dir, f))
	}
	for _, sub := range []string{"cmd", "internal", "kernel", "packaging", pkg.HicartDir, pkg.RacksDir} {
		src := filepath.Join(repoRoot, sub)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, path)
			if d.IsDir() {
				if d.Name() == "testdata" && sub == "internal" {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || strings.HasSuffix(d.Name(), "_test.go") {
				return nil
			}
			if sub == "kernel" && !isSource(d.Name()) {
				return nil
			}
			copyTestFile(t, path, filepath.Join(dir, rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if withProvider {
		writeTestFile(t, filepath.Join(dir, "rdma-core", "Makefile"), testProviderMakefile)
		writeTestFile(t, filepath.Join(dir, pkg.ProviderSrc, "hicain.c"), testProviderC)
	}
	return dir
}

// copyTree copies the files under src to dst, leaving out the top-level
// entries named in skip.
func copyTree(t testing.TB, src, dst string, skip ...string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if slices.Contains(skip, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			copyTestFile(t, path, filepath.Join(dst, rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func isSource(name string) bool {
	return name == "Kbuild" || name == "Makefile" || strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h")
}

func copyTestFile(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, dst, string(data))
}

func writeTestFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// commands returns a fresh hinic command tree, as the pkg build command
// hands to pkg.
func commands() *cobra.Command {
	ios, _, _, _ := cmdutil.Test()
	return cli.NewCmdRoot(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}))
}

// headersKernel returns a kernel release whose headers are installed
// (deps.sh installs linux-headers-amd64), preferring the newest.
func headersKernel() string {
	makefiles, _ := filepath.Glob("/lib/modules/*/build/Makefile")
	sort.Strings(makefiles)
	if len(makefiles) == 0 {
		return ""
	}
	return filepath.Base(filepath.Dir(filepath.Dir(makefiles[len(makefiles)-1])))
}

// requireBuildTools skips (or, in CI, fails) a test that needs the tools
// a full build runs.
func requireBuildTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"go", "make", "gcc", "strip", "dpkg-query", "lintian"} {
		_, err := exec.LookPath(tool)
		testutil.RequireTool(t, tool, "scripts/deps.sh installs it", err == nil)
	}
	_, err := os.Stat("/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
	testutil.RequireTool(t, "libibverbs.so.1", "apt-get install libibverbs1", err == nil || pkg.DebArch() != "amd64")
	testutil.RequireTool(t, "kernel headers", "apt-get install linux-headers-amd64", headersKernel() != "")
}

// shared is one build of every package, with lintian, that several tests
// read.
var shared struct {
	once    sync.Once
	dir     string
	repo    string
	kernel  string
	results []pkg.Result
	err     error
	elapsed time.Duration
}

func sharedBuild(t *testing.T) []pkg.Result {
	t.Helper()
	requireBuildTools(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "hinic-pkg-test-")
		if shared.err != nil {
			return
		}
		shared.repo = newRepo(t, filepath.Join(shared.dir, "repo"), true)
		withTestModules(t, shared.repo)
		shared.kernel = headersKernel()
		start := time.Now()
		shared.results, shared.err = pkg.Build(context.Background(), testOptions(shared.repo, filepath.Join(shared.dir, "out1"), shared.kernel, testEpoch, true))
		shared.elapsed = time.Since(start)
	})
	if shared.err != nil {
		t.Fatalf("build: %v", shared.err)
	}
	return shared.results
}

func testOptions(repo, out, kernel string, epoch time.Time, lintian bool) pkg.Options {
	return pkg.Options{
		Repo:     repo,
		Out:      out,
		Kernel:   kernel,
		Epoch:    epoch,
		Version:  testVersion,
		Commit:   testCommit,
		Lintian:  lintian,
		Commands: commands(),
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// result returns the result of package name.
func result(t *testing.T, results []pkg.Result, name string) pkg.Result {
	t.Helper()
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for %s", name)
	return pkg.Result{}
}
