package pkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/testutil"
)

func TestKbuildModules(t *testing.T) {
	tests := []struct {
		name    string
		kbuild  string
		want    []string
		wantErr string
	}{
		{name: "one", kbuild: "ccflags-y += -Werror\n\nobj-m += hicain_net.o\n", want: []string{"hicain_net"}},
		{name: "two lines", kbuild: "obj-m += hicain_net.o\nobj-m += hicain_ib.o\n", want: []string{"hicain_net", "hicain_ib"}},
		{name: "one line, :=", kbuild: "obj-m := hicain_net.o hicain_ib.o # both\n", want: []string{"hicain_net", "hicain_ib"}},
		{name: "continuation", kbuild: "obj-m += hicain_net.o \\\n\thicain_ib.o\nhicain_ib-y := a.o b.o\n", want: []string{"hicain_net", "hicain_ib"}},
		{name: "commented out", kbuild: "obj-m += hicain_net.o\n# obj-m += hicain_ib.o\n", want: []string{"hicain_net"}},
		{name: "none", kbuild: "ccflags-y += -Werror\n", wantErr: "no obj-m"},
		{name: "not an object", kbuild: "obj-m += hicain_net.c\n", wantErr: "not a module object"},
		{name: "hinic clash", kbuild: "obj-m += hinic.o\n", wantErr: "clashes with Linux's hinic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := t.TempDir()
			if err := os.MkdirAll(filepath.Join(repo, KernelDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo, KernelDir, "Kbuild"), []byte(tt.kbuild), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := KbuildModules(repo)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("KbuildModules = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestKbuildModulesOfRepo(t *testing.T) {
	mods, err := KbuildModules(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(mods, "hicain_net") {
		t.Errorf("kernel/Kbuild builds %v, without hicain_net", mods)
	}
}

func TestVersionFromDescribe(t *testing.T) {
	epoch := time.Date(2026, 11, 30, 13, 8, 33, 0, time.UTC)
	tests := []struct{ describe, want string }{
		{"v0.2.0", "0.2.0"},
		{"v0.2.0-dirty", "0.2.0+dirty"},
		{"v0.2.0-3-g0123456", "0.2.0+git3.0123456"},
		{"v0.2.0-3-g0123456-dirty", "0.2.0+git3.0123456.dirty"},
		{"v1.0.0~rc1", "1.0.0~rc1"},
		{"c68b9db", "0.0.0+git20261130.c68b9db"},
		{"c68b9db-dirty", "0.0.0+git20261130.c68b9db.dirty"},
		{"", "0.0.0"},
		{"release-1", "0.0.0"},
	}
	for _, tt := range tests {
		got := versionFromDescribe(tt.describe, epoch)
		if got != tt.want {
			t.Errorf("versionFromDescribe(%q) = %q, want %q", tt.describe, got, tt.want)
		}
		if err := checkVersion(got); err != nil {
			t.Errorf("%q: %v", got, err)
		}
	}
	for _, bad := range []string{"v1.0", "1.0-1", "1:1.0", "", "1.0 beta"} {
		if checkVersion(bad) == nil {
			t.Errorf("checkVersion(%q) accepted", bad)
		}
	}
}

func TestResolveEpoch(t *testing.T) {
	dir := t.TempDir() // not a git checkout
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if got, err := ResolveEpoch(context.Background(), dir); err != nil || got.Unix() != 1700000000 {
		t.Errorf("with SOURCE_DATE_EPOCH: %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := ResolveEpoch(context.Background(), dir); err == nil {
		t.Error("an unparsable SOURCE_DATE_EPOCH was accepted")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if got, err := ResolveEpoch(context.Background(), dir); err != nil || got.Unix() != DefaultEpoch {
		t.Errorf("outside git: %v, %v; want %d", got, err, DefaultEpoch)
	}
	if gitOutput(context.Background(), filepath.Join("..", ".."), "rev-parse", "HEAD") == "" {
		t.Skip("not a git checkout")
	}
	want := gitOutput(context.Background(), filepath.Join("..", ".."), "log", "-1", "--format=%ct")
	if got, err := ResolveEpoch(context.Background(), filepath.Join("..", "..")); err != nil || want == "" || strconv.FormatInt(got.Unix(), 10) != want {
		t.Errorf("in the checkout: %v, %v; want the last commit's %s", got, err, want)
	}
}

func TestParseLintian(t *testing.T) {
	out := `E: hinic: description-starts-with-package-name
W: hicain-modules-6.1.0-57-amd64: package-has-long-file-name hicain-modules-6.1.0-57-amd64_1-1_amd64.deb
I: hinic: spelling-error-in-binary mimimum minimum [usr/bin/hinic]
P: libhicain amd64 (binary): some-pedantic-tag
N: a note line
O: hinic: statically-linked-binary [usr/bin/hinic]
warning: running with root privileges is not recommended!
`
	got := ParseLintian([]byte(out))
	want := []LintianTag{
		{"E", "hinic", "description-starts-with-package-name", ""},
		{"W", "hicain-modules-6.1.0-57-amd64", "package-has-long-file-name", "hicain-modules-6.1.0-57-amd64_1-1_amd64.deb"},
		{"I", "hinic", "spelling-error-in-binary", "mimimum minimum [usr/bin/hinic]"},
		{"P", "libhicain", "some-pedantic-tag", ""},
		{"O", "hinic", "statically-linked-binary", "[usr/bin/hinic]"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ParseLintian:\n got %v\nwant %v", got, want)
	}
}

func TestWrapDescription(t *testing.T) {
	long := strings.Repeat("word ", 60)
	got := wrapDescription("synopsis\n" + long)
	lines := strings.Split(got, "\n")
	if lines[0] != "synopsis" || len(lines) < 4 {
		t.Fatalf("wrapDescription: %q", got)
	}
	for _, l := range lines {
		if len(l) > 72 {
			t.Errorf("line of %d: %q", len(l), l)
		}
	}
	if strings.Join(strings.Fields(strings.Join(lines[1:], " ")), " ") != strings.TrimSpace(long) {
		t.Error("words lost")
	}
}

func TestDKMSConf(t *testing.T) {
	got := DKMSConf("1.2.3", []string{"hicain_net", "hicain_ib"})
	for _, want := range []string{
		`PACKAGE_NAME="hicain"`, `PACKAGE_VERSION="1.2.3"`,
		`BUILT_MODULE_NAME[0]="hicain_net"`, `DEST_MODULE_LOCATION[0]="/updates/dkms"`,
		`BUILT_MODULE_NAME[1]="hicain_ib"`, `DEST_MODULE_LOCATION[1]="/updates/dkms"`,
		`AUTOINSTALL="yes"`, `M=${dkms_tree}/${PACKAGE_NAME}/${PACKAGE_VERSION}/build modules"`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("dkms.conf lacks %s:\n%s", want, got)
		}
	}
}

func TestUpstreamVersion(t *testing.T) {
	for in, want := range map[string]string{"44.0-2": "44.0", "1:44.0-2+deb12u1": "44.0", "44.0": "44.0", "2.36-9+deb12u14": "2.36"} {
		if got := upstreamVersion(in); got != want {
			t.Errorf("upstreamVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVersionLess(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{{"", "2.2.5", true}, {"2.2.5", "2.34", true}, {"2.34", "2.4", false}, {"2.34", "2.34", false}, {"2.3.4", "2.3", false}} {
		if got := versionLess(tt.a, tt.b); got != tt.want {
			t.Errorf("versionLess(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown package", Options{Out: t.TempDir(), Only: []string{"hinic-modules"}}, "unknown package"},
		{"no output", Options{Only: []string{NameDKMS}}, "no output directory"},
		{"no kernel", Options{Out: t.TempDir(), Only: []string{NameModules}}, "kernel release"},
		{"bad kernel", Options{Out: t.TempDir(), Only: []string{NameModules}, Kernel: "../../etc"}, "kernel release"},
		{"no command tree", Options{Out: t.TempDir(), Only: []string{NameHost}}, "no command tree"},
		{"bad version", Options{Out: t.TempDir(), Only: []string{NameDKMS}, Version: "v1.0"}, "upstream version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestScriptPlaceholders(t *testing.T) {
	repo := t.TempDir()
	dir := filepath.Join(repo, PackagingDir, "x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := "#!/bin/sh\nset -e\ndepmod -a @KVER@ \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "postinst"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &build{opts: Options{Repo: repo}, stage: t.TempDir()}
	path, err := b.script("x", "postinst", map[string]string{"KVER": "6.1.0-57-amd64"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "#!/bin/sh\nset -e\ndepmod -a 6.1.0-57-amd64 \"$@\"\n" {
		t.Errorf("script:\n%s", got)
	}
	if _, err := b.script("x", "postinst", nil); err == nil || !strings.Contains(err.Error(), "@KVER@") {
		t.Errorf("unset placeholder: %v", err)
	}
}

// TestLintianErrorFails packs a package lintian rejects (its synopsis
// starts with the package name, an error) and checks that the check
// fails with ErrLintian and reports the tag.
func TestLintianErrorFails(t *testing.T) {
	if _, err := exec.LookPath("lintian"); err != nil {
		testutil.RequireTool(t, "lintian", "scripts/deps.sh installs it", false)
	}
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	b := &build{opts: Options{Repo: repo, Out: t.TempDir()}, stage: t.TempDir(), version: "1.0", epoch: time.Unix(DefaultEpoch, 0).UTC()}
	file := filepath.Join(b.stage, "example.conf")
	if err := os.WriteFile(file, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := b.pack(debSpec{
		Name: "libhicain", Arch: "all", Section: "net",
		Description: "libhicain, a package whose synopsis names itself\n" + strings.Repeat("More words to describe it. ", 8),
		Entries:     []entry{{Src: file, Dst: "/usr/share/doc/libhicain/examples/example.conf", Mode: modeFile}},
		Dir:         NameProvider,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Name = NameProvider
	results := []Result{r}
	err = b.lintian(context.Background(), results)
	if !errors.Is(err, ErrLintian) || !strings.Contains(err.Error(), "E: libhicain: description-starts-with-package-name") {
		t.Errorf("err = %v", err)
	}
	if !results[0].Checked || !hasSeverity(results[0].Lintian, "E") {
		t.Errorf("result %+v", results[0])
	}
}

// TestAddControlFilesRefuses checks that what is not a .deb nfpm wrote is
// refused, not rewritten: the input is our own build's, but a wrong one
// must fail the build rather than ship a broken package.
func TestAddControlFilesRefuses(t *testing.T) {
	hdr := func(name string, size int) string {
		return fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, 0, 0, 0, "100644", size)
	}
	for _, tc := range []struct{ name, data string }{
		{"not ar", "PK\x03\x04"},
		{"truncated header", arMagic + "debian-binary"},
		{"size beyond the end", arMagic + hdr("debian-binary", 100) + "2.0\n"},
		{"no control member", arMagic + hdr("debian-binary", 4) + "2.0\n"},
		{"control not gzip", arMagic + hdr("control.tar.gz", 4) + "abcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.deb")
			if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := addControlFiles(path, map[string]string{"shlibs": "x\n"}, time.Unix(0, 0)); err == nil {
				t.Errorf("%q accepted", tc.data)
			}
			if got, _ := os.ReadFile(path); string(got) != tc.data {
				t.Errorf("file changed to %q", got)
			}
		})
	}
}

// FuzzAddControlFiles: any input is refused or rewritten without a
// panic, and a rewritten package has the member once (a second add is
// refused as a duplicate).
func FuzzAddControlFiles(f *testing.F) {
	hdr := func(name string, size int) string {
		return fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, 0, 0, 0, "100644", size)
	}
	f.Add([]byte(arMagic + hdr("debian-binary", 4) + "2.0\n"))
	f.Add([]byte(arMagic + hdr("control.tar.gz", 3) + "abc\n"))
	f.Add([]byte("!<arch>\n"))
	// A package with a real control.tar.gz: the path that rewrites.
	ctl, err := extendControl(gzipTar(f), map[string]string{"control": "Package: x\n"}, time.Unix(0, 0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(arMagic + hdr("debian-binary", 4) + "2.0\n" + hdr("control.tar.gz", len(ctl)) + string(ctl) + map[bool]string{true: "\n"}[len(ctl)%2 == 1]))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f.deb")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{"shlibs": "x\n"}
		if err := addControlFiles(path, m, time.Unix(0, 0)); err != nil {
			return
		}
		if err := addControlFiles(path, m, time.Unix(0, 0)); err == nil {
			t.Error("a second shlibs was added")
		}
	})
}

// gzipTar is an empty tar, gzipped.
func gzipTar(t testing.TB) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := tar.NewWriter(zw).Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
