package image

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestHostMirrors(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/apt/sources.list.d"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/apt/sources.list"), []byte(
		"# old style\ndeb [arch=amd64] http://ftp.example.org/debian bookworm main contrib\ndeb http://other/ubuntu jammy main\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/apt/sources.list.d/debian.sources"), []byte(`Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://mirror.example/debian
Suites: bookworm
Components: main
`), 0o644)
	os.WriteFile(filepath.Join(root, "etc/apt/sources.list.d/node.sources"), []byte(
		"Types: deb\nURIs: https://node.example/node_20.x\nSuites: nodistro\nComponents: main\n"), 0o644)
	got, err := HostMirrors(root, "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deb http://ftp.example.org/debian bookworm main contrib",
		"deb http://mirror.example/debian bookworm main",
		"deb http://mirror.example/debian bookworm-updates main",
		"deb http://mirror.example/debian-security bookworm-security main",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := HostMirrors(t.TempDir(), "bookworm"); err == nil {
		t.Error("no sources: no error")
	}
}

func TestParseDpkgStatus(t *testing.T) {
	in := `Package: perftest
Status: install ok installed
Version: 4.5+0.17-1

Package: removed
Status: deinstall ok config-files
Version: 1.0

Package: linux-image-6.1.0-57-amd64
Status: install ok installed
Version: 6.1.192-3
`
	got, err := ParseDpkgStatus(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{"linux-image-6.1.0-57-amd64", "6.1.192-3"}, {"perftest", "4.5+0.17-1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
}

func TestSpecKey(t *testing.T) {
	a := Spec{Name: "g", Suite: "bookworm", Kernel: "linux-image-6.1.0-57-amd64", Packages: BasePackages, Size: "3G"}
	b := a
	if a.Key() != b.Key() {
		t.Error("same spec, different keys")
	}
	b.Kernel = "linux-image-6.1.0-58-amd64"
	if a.Key() == b.Key() {
		t.Error("a kernel change kept the key")
	}
	c := a
	c.Debs = []string{"abc:x.deb"}
	if a.Key() == c.Key() {
		t.Error("an extra .deb kept the key")
	}
}

func TestManifestVerify(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileKernel), []byte("kernel"), 0o644)
	sum, _ := FileSHA256(filepath.Join(dir, FileKernel))
	m := &Manifest{Artifacts: []Artifact{{Name: FileKernel, Size: 6, SHA256: sum}}}
	if err := m.Verify(dir, true); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, FileKernel), []byte("kernex"), 0o644)
	if err := m.Verify(dir, false); err != nil {
		t.Errorf("size check: %v", err)
	}
	if err := m.Verify(dir, true); err == nil {
		t.Error("changed content passed the sha256 check")
	}
}

func TestDebHooks(t *testing.T) {
	hooks, err := debHooks([]string{"aa:/tmp/d/hicain-modules-6.1.0-57-amd64_1.0-1_amd64.deb", "bb:rel/libhicain_1.0-1_amd64.deb"})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	want := []string{
		`--customize-hook=mkdir -p "$1/var/cache/hinic-debs"`,
		"--customize-hook=copy-in /tmp/d/hicain-modules-6.1.0-57-amd64_1.0-1_amd64.deb " + wd + "/rel/libhicain_1.0-1_amd64.deb /var/cache/hinic-debs",
		`--customize-hook=chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ` +
			"/var/cache/hinic-debs/hicain-modules-6.1.0-57-amd64_1.0-1_amd64.deb /var/cache/hinic-debs/libhicain_1.0-1_amd64.deb",
		`--customize-hook=rm -rf "$1/var/cache/hinic-debs"`,
	}
	if strings.Join(hooks, "\n") != strings.Join(want, "\n") {
		t.Errorf("hooks:\n%s\nwant:\n%s", strings.Join(hooks, "\n"), strings.Join(want, "\n"))
	}
	if _, err := debHooks([]string{"aa:/tmp/my debs/x.deb"}); err == nil {
		t.Error("a path with a blank was accepted")
	}
}
