package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnloadScript runs the guest script that lets the image's modules
// go after debs: are installed, against a /sys/module of directories and
// an rmmod that refuses a module whose holder is still loaded: it
// unloads every loaded module the packages ship, dependents first over
// as many passes as it takes, leaves the others, says nothing when none
// is loaded, and fails naming a module that stays in use.
func TestUnloadScript(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("no dpkg-deb")
	}
	dir := t.TempDir()
	// A package of modules: zzz_user holds aaa_core, which sorts first.
	root := filepath.Join(dir, "pkg")
	for _, f := range []string{"DEBIAN/control", "lib/modules/6.1.0-57-amd64/updates/hicain/hicain_net.ko",
		"lib/modules/6.1.0-57-amd64/updates/hicain/hicain_ib.ko", "lib/modules/6.1.0-57-amd64/updates/x/aaa_core.ko",
		"lib/modules/6.1.0-57-amd64/updates/x/zzz-user.ko.xz", "lib/modules/6.1.0-57-amd64/updates/x/higpu.ko",
		"usr/share/doc/hicain/README.ko.txt"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body := ""
		if strings.HasSuffix(f, "control") {
			body = "Package: hicain-test\nVersion: 1\nArchitecture: all\nMaintainer: x <x@mirror.example>\nDescription: test\n"
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, "hicain-test.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-b", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, out)
	}
	sys := filepath.Join(dir, "sys")
	rmmod := filepath.Join(dir, "rmmod")
	if err := os.WriteFile(rmmod, []byte(`#!/bin/sh
d=`+sys+`/$1
[ -d "$d" ] || exit 1
for h in $(cat "$d/holders" 2>/dev/null); do [ -d `+sys+`/$h ] && exit 1; done
rm -r "$d"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	load := func(mods map[string]string) {
		t.Helper()
		os.RemoveAll(sys)
		for m, holders := range mods {
			if err := os.MkdirAll(filepath.Join(sys, m), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sys, m, "holders"), []byte(holders), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func() (string, error) {
		out, err := exec.Command("sh", "-c", unloadScript(sys, rmmod, []string{deb})).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	loaded := func() []string {
		es, _ := os.ReadDir(sys)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}

	load(map[string]string{"hicain_net": "hicain_ib", "hicain_ib": "", "aaa_core": "zzz_user", "zzz_user": "", "ib_core": "hicain_ib"})
	out, err := run()
	if err != nil || out != "unloaded the image's modules: hicain_ib hicain_net zzz_user aaa_core" {
		t.Fatalf("%q, %v", out, err)
	}
	if got := loaded(); len(got) != 1 || got[0] != "ib_core" {
		t.Errorf("left loaded: %v", got)
	}

	load(map[string]string{"ib_core": ""})
	if out, err := run(); err != nil || out != "" {
		t.Errorf("nothing to unload: %q, %v", out, err)
	}

	// ib_ipoib (not in the packages) holds hicain_ib.
	load(map[string]string{"hicain_net": "hicain_ib", "hicain_ib": "ib_ipoib", "ib_ipoib": ""})
	if out, err := run(); err == nil || out != "modules still loaded (in use): hicain_ib hicain_net" {
		t.Errorf("a module in use: %q, %v", out, err)
	}
}
