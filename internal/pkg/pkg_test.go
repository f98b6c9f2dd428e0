package pkg_test

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/pkg"
	"github.com/PacketFive/hinic/internal/testutil"
)

func TestBuildAll(t *testing.T) {
	results := sharedBuild(t)
	t.Logf("full build with lintian: %.1f s", shared.elapsed.Seconds())
	var names []string
	for _, r := range results {
		names = append(names, r.Name)
		if !r.Built {
			t.Errorf("%s not built: %s", r.Name, r.Note)
			continue
		}
		data, err := os.ReadFile(r.File)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != r.SHA256 || int64(len(data)) != r.Size {
			t.Errorf("%s: result says %d bytes sha256 %s; file has %d bytes sha256 %x", r.Name, r.Size, r.SHA256, len(data), sum)
		}
		if r.Version != testVersion+"-1" {
			t.Errorf("%s: version %q", r.Name, r.Version)
		}
		t.Logf("%s  %d bytes  sha256 %s", filepath.Base(r.File), r.Size, r.SHA256)
	}
	if !slices.Equal(names, pkg.Names) {
		t.Errorf("results for %v, want %v", names, pkg.Names)
	}
}

func TestReproducible(t *testing.T) {
	first := sharedBuild(t)
	again, err := pkg.Build(context.Background(), testOptions(shared.repo, filepath.Join(shared.dir, "out2"), shared.kernel, testEpoch, false))
	if err != nil {
		t.Fatal(err)
	}
	later, err := pkg.Build(context.Background(), testOptions(shared.repo, filepath.Join(shared.dir, "out3"), shared.kernel, testEpoch.Add(86400e9), false))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range first {
		if again[i].SHA256 != r.SHA256 {
			t.Errorf("%s: same inputs, different bytes: %s then %s", r.Name, r.SHA256, again[i].SHA256)
		}
		if later[i].SHA256 == r.SHA256 {
			t.Errorf("%s: a different SOURCE_DATE_EPOCH gave the same bytes %s", r.Name, r.SHA256)
		}
	}
}

// TestEveryMemberAtEpoch checks what reproducibility rests on: every ar
// member, control file and data entry carries the epoch and root
// ownership, with the modes Debian expects.
func TestEveryMemberAtEpoch(t *testing.T) {
	for _, r := range sharedBuild(t) {
		d := readDeb(t, r.File)
		var names []string
		for _, m := range d.Members {
			names = append(names, m.Name)
			if m.MTime != testEpoch.Unix() {
				t.Errorf("%s: ar member %s mtime %d, want %d", r.Name, m.Name, m.MTime, testEpoch.Unix())
			}
		}
		if !slices.Equal(names, []string{"debian-binary", "control.tar.gz", "data.tar.gz"}) {
			t.Errorf("%s: ar members %v", r.Name, names)
		}
		for _, e := range d.Data {
			if !e.ModTime.Equal(testEpoch) {
				t.Errorf("%s: %s mtime %v", r.Name, e.Name, e.ModTime)
			}
			if e.Uid != 0 || e.Gid != 0 || (e.Uname != "root" && e.Uname != "") {
				t.Errorf("%s: %s owned by %s(%d):%s(%d)", r.Name, e.Name, e.Uname, e.Uid, e.Gname, e.Gid)
			}
			want := int64(0o644)
			switch {
			case e.Type == tar.TypeDir, strings.HasPrefix(e.Name, "./usr/bin/"):
				want = 0o755
			case e.Type == tar.TypeSymlink:
				want = 0 // as nfpm writes them; the bits of a link mean nothing
			}
			if e.Mode != want {
				t.Errorf("%s: %s mode %o, want %o", r.Name, e.Name, e.Mode, want)
			}
		}
	}
}

// controlWant is what each package's control file must say.
func controlWant(kernel, ibverbs string) map[string]map[string]string {
	up := ibverbs
	if i := strings.LastIndexByte(up, '-'); i > 0 {
		up = up[:i]
	}
	major, _ := strconv.Atoi(strings.SplitN(up, ".", 2)[0])
	next := strconv.Itoa(major + 1)
	return map[string]map[string]string{
		pkg.NameHost: {
			"Package": "hinic", "Architecture": pkg.DebArch(), "Section": "net",
			"Recommends": strings.Join(pkg.HostRecommends, ", "),
		},
		pkg.NameDKMS: {
			"Package": "hicain-dkms", "Architecture": "all", "Section": "kernel",
			"Depends": "dkms (>= 2.1.0.0)", "Multi-Arch": "foreign",
		},
		pkg.NameModules: {
			"Package": "hicain-modules-" + kernel, "Architecture": pkg.DebArch(), "Section": "kernel",
			"Depends": "linux-image-" + kernel, "Provides": "hicain-modules", "Conflicts": "hicain-dkms",
		},
		pkg.NameProvider: {
			"Package": "libhicain", "Architecture": pkg.DebArch(), "Section": "net", "Multi-Arch": "same",
			"Depends": "libibverbs1 (>= " + up + "), libibverbs1 (<< " + next + "~), libc6 (>= ",
		},
		pkg.NameHicart: {
			"Package": "libhicart1", "Architecture": pkg.DebArch(), "Section": "libs", "Multi-Arch": "same",
			"Depends": "libc6 (>= ",
		},
		pkg.NameHicartDev: {
			"Package": "libhicart-dev", "Architecture": pkg.DebArch(), "Section": "libdevel", "Multi-Arch": "same",
			"Depends": "libhicart1 (= " + testVersion + "-1)",
		},
		pkg.NameHicartTools: {
			"Package": "hicart-tools", "Architecture": pkg.DebArch(), "Section": "utils",
			"Depends": "libhicart1 (>= " + testVersion + "), libc6 (>= ",
		},
	}
}

func TestControlFields(t *testing.T) {
	results := sharedBuild(t)
	ibverbs, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "libibverbs1").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := controlWant(shared.kernel, string(ibverbs))
	for _, r := range results {
		d := readDeb(t, r.File)
		f := d.Fields
		for k, v := range want[r.Name] {
			got := f[k]
			if strings.HasSuffix(v, "(>= ") {
				if !strings.HasPrefix(got, v) {
					t.Errorf("%s: %s = %q, want it to start with %q", r.Name, k, got, v)
				}
				continue
			}
			if got != v {
				t.Errorf("%s: %s = %q, want %q", r.Name, k, got, v)
			}
		}
		if f["Version"] != testVersion+"-1" || f["Maintainer"] != pkg.Maintainer || f["Homepage"] != pkg.Homepage || f["Priority"] != "optional" {
			t.Errorf("%s: control\n%s", r.Name, d.Control["control"])
		}
		syn, ext, _ := strings.Cut(f["Description"], "\n")
		if syn == "" || strings.HasPrefix(strings.ToLower(syn), r.Package) || len(ext) < 80 {
			t.Errorf("%s: description %q", r.Name, f["Description"])
		}
		for _, line := range strings.Split(d.Control["control"], "\n") {
			if len(line) > 80 && !strings.HasPrefix(line, "Depends:") {
				t.Errorf("%s: control line longer than 80: %q", r.Name, line)
			}
		}
		doc := "/usr/share/doc/" + r.Package
		for _, p := range []string{doc + "/copyright", doc + "/changelog.Debian.gz", "/usr/share/lintian/overrides/" + r.Package} {
			if d.file(p) == nil {
				t.Errorf("%s: no %s", r.Name, p)
			}
		}
	}
}

func TestHostPackage(t *testing.T) {
	r := result(t, sharedBuild(t), pkg.NameHost)
	d := readDeb(t, r.File)
	hf, err := pkg.HostFiles(shared.repo)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{pkg.HostBinary, pkg.BashCompletion, pkg.ZshCompletion, pkg.FishCompletion,
		pkg.ManDir + "/hinic.1.gz", pkg.ManDir + "/hinic-pkg-build.1.gz", pkg.ManDir + "/hinic-fabric-serve.1.gz"}
	for _, f := range hf {
		want = append(want, f.Dst)
	}
	for _, p := range want {
		if d.file(p) == nil {
			t.Errorf("hinic: no %s in %v", p, d.paths())
		}
	}
	for _, f := range hf {
		src, err := os.ReadFile(filepath.Join(shared.repo, f.Src))
		if err != nil {
			t.Fatal(err)
		}
		if e := d.file(f.Dst); e != nil && string(e.Data) != string(src) {
			t.Errorf("hinic: %s differs from %s", f.Dst, f.Src)
		}
	}
	if got := d.Control["conffiles"]; got != "/etc/hinic/fabric.yaml\n" {
		t.Errorf("conffiles = %q", got)
	}
	if !strings.Contains(string(d.file(pkg.BashCompletion).Data), "__start_hinic") {
		t.Error("bash completion does not define __start_hinic")
	}

	// The packaged binary runs and carries the package's version and
	// commit.
	bin := filepath.Join(t.TempDir(), "hinic")
	if err := os.WriteFile(bin, d.file(pkg.HostBinary).Data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("hinic version: %v", err)
	}
	var v struct{ Version, Commit, Date string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != "v"+testVersion || v.Commit != testCommit || v.Date != "2026-01-02T03:04:05Z" {
		t.Errorf("packaged hinic version: %+v", v)
	}
	// The unit's config file is one hinic accepts.
	unit := string(d.file("/lib/systemd/system/hinic-fabric.service").Data)
	if !strings.Contains(unit, "ExecStart="+pkg.HostBinary+" --config /etc/hinic/fabric.yaml fabric serve") {
		t.Errorf("unit ExecStart:\n%s", unit)
	}
	checkUnit(t, unit, bin)

	// The maintainer scripts make the unit's user and stop it on removal.
	if got := d.Fields["Depends"]; !strings.Contains(got, "adduser") {
		t.Errorf("Depends %q: the postinst runs adduser", got)
	}
	for name, want := range map[string]string{
		"postinst": "adduser --system", "prerm": "deb-systemd-invoke stop hinic-fabric.service",
		"postrm": "deb-systemd-helper purge hinic-fabric.service",
	} {
		body := d.Control[name]
		if !strings.Contains(body, want) {
			t.Errorf("%s lacks %q:\n%s", name, want, body)
		}
		script := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", name, err, out)
		}
	}
}

// checkUnit has systemd-analyze verify the packaged unit, with ExecStart
// pointed at bin (systemd checks that it is executable): every key must
// be one systemd 252 knows, with a valid value, and the unit must run as
// the hinic user with its hardening in place.
func checkUnit(t *testing.T, unit, bin string) {
	t.Helper()
	for _, want := range []string{"User=hinic", "Group=hinic", "RuntimeDirectoryMode=0750", "NoNewPrivileges=yes",
		"ProtectSystem=strict", "CapabilityBoundingSet=\n", "RestrictAddressFamilies=AF_UNIX", "SystemCallFilter=@system-service"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit keys not verified")
		return
	}
	p := filepath.Join(t.TempDir(), "hinic-fabric.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(unit, "ExecStart="+pkg.HostBinary, "ExecStart="+bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", "--man=no", p).CombinedOutput()
	// Warnings about the host (no running systemd, unknown units it
	// orders after) are not the unit's; every line naming the file is.
	var bad []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, filepath.Base(p)) {
			bad = append(bad, l)
		}
	}
	if err != nil || len(bad) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestModulesPackage(t *testing.T) {
	r := result(t, sharedBuild(t), pkg.NameModules)
	d := readDeb(t, r.File)
	mods, err := pkg.KbuildModules(shared.repo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, m := range mods {
		p := "/lib/modules/" + shared.kernel + "/updates/hicain/" + m + ".ko"
		e := d.file(p)
		if e == nil {
			t.Fatalf("no %s in %v", p, d.paths())
		}
		ko := filepath.Join(dir, m+".ko")
		if err := os.WriteFile(ko, e.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		info, err := pkg.ModInfo(ko)
		if err != nil {
			t.Fatal(err)
		}
		if info["name"] != m || !strings.HasPrefix(info["vermagic"], shared.kernel+" ") || info["license"] != "GPL" {
			t.Errorf("%s: modinfo name %q vermagic %q", m, info["name"], info["vermagic"])
		}
		f, err := elf.Open(ko)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != elf.ET_REL || f.Section(".debug_info") != nil {
			t.Errorf("%s: ELF type %v, debug info %v", m, f.Type, f.Section(".debug_info") != nil)
		}
		f.Close()
	}
	load := d.file("/usr/lib/modules-load.d/hicain-" + shared.kernel + ".conf")
	if load == nil {
		t.Fatalf("no modules-load.d entry in %v", d.paths())
	}
	var listed []string
	for _, l := range strings.Split(string(load.Data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			listed = append(listed, l)
		}
	}
	if !slices.Equal(listed, mods) {
		t.Errorf("modules-load.d lists %v, want %v", listed, mods)
	}
	for _, s := range []string{"postinst", "postrm"} {
		if !strings.Contains(d.Control[s], "depmod -a "+shared.kernel+" ") || strings.Contains(d.Control[s], "@") {
			t.Errorf("%s:\n%s", s, d.Control[s])
		}
	}
}

// TestRealKernelModules packages the drivers of kernel/ as they are, for
// the kernel whose headers are installed.
func TestRealKernelModules(t *testing.T) {
	requireBuildTools(t)
	repo := newRepo(t, t.TempDir(), false)
	mods, err := pkg.KbuildModules(repo)
	if err != nil {
		t.Fatal(err)
	}
	kernel := headersKernel()
	results, err := pkg.Build(context.Background(), pkg.Options{Repo: repo, Out: t.TempDir(), Only: []string{pkg.NameModules},
		Kernel: kernel, Epoch: testEpoch, Version: testVersion, Lintian: true})
	if err != nil {
		t.Fatal(err)
	}
	d := readDeb(t, results[0].File)
	for _, m := range mods {
		if d.file("/lib/modules/"+kernel+"/updates/hicain/"+m+".ko") == nil {
			t.Errorf("no %s.ko in %v", m, d.paths())
		}
	}
	for _, tag := range results[0].Lintian {
		if tag.Severity == "E" {
			t.Errorf("lintian: %s", tag)
		}
	}
}

// TestRealProvider packages the provider of rdma-core/ as it is, twice:
// the same bytes both times, and lintian finds no error.
func TestRealProvider(t *testing.T) {
	requireBuildTools(t)
	if _, err := os.Stat(filepath.Join(repoRoot, pkg.ProviderSrc)); err != nil {
		t.Skipf("%s is absent; TestProviderPackage covers the code with a test provider", pkg.ProviderSrc)
	}
	repo := newRepo(t, t.TempDir(), false)
	copyTree(t, filepath.Join(repoRoot, pkg.ProviderDir), filepath.Join(repo, pkg.ProviderDir), "build", pkg.ProviderDriver)
	var sums []string
	for i, lint := range []bool{true, false} {
		results, err := pkg.Build(context.Background(), pkg.Options{Repo: repo, Out: t.TempDir(), Only: []string{pkg.NameProvider},
			Epoch: testEpoch, Version: testVersion, Lintian: lint})
		if err != nil {
			t.Fatal(err)
		}
		r := results[0]
		if !r.Built {
			t.Fatalf("not built: %s", r.Note)
		}
		sums = append(sums, r.SHA256)
		for _, tag := range r.Lintian {
			t.Logf("%s", tag)
			if tag.Severity == "E" {
				t.Errorf("lintian: %s", tag)
			}
		}
		if i == 0 {
			d := readDeb(t, r.File)
			if d.file("/etc/libibverbs.d/hicain.driver") == nil || !strings.HasPrefix(d.Fields["Depends"], "libibverbs1 (>= ") {
				t.Errorf("provider package: %v, Depends %q", d.paths(), d.Fields["Depends"])
			}
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds of the provider differ: %s, %s", sums[0], sums[1])
	}
}

func TestDKMSPackage(t *testing.T) {
	r := result(t, sharedBuild(t), pkg.NameDKMS)
	d := readDeb(t, r.File)
	mods, err := pkg.KbuildModules(shared.repo)
	if err != nil {
		t.Fatal(err)
	}
	src := "/usr/src/hicain-" + testVersion
	conf := d.file(src + "/dkms.conf")
	if conf == nil {
		t.Fatalf("no dkms.conf in %v", d.paths())
	}
	if string(conf.Data) != pkg.DKMSConf(testVersion, mods) {
		t.Errorf("dkms.conf:\n%s", conf.Data)
	}
	for i, m := range mods {
		if !strings.Contains(string(conf.Data), "BUILT_MODULE_NAME["+strconv.Itoa(i)+"]=\""+m+"\"") {
			t.Errorf("dkms.conf does not build %s", m)
		}
	}
	kernelFiles, _ := filepath.Glob(filepath.Join(shared.repo, "kernel", "*"))
	for _, kf := range kernelFiles {
		if d.file(src+"/"+filepath.Base(kf)) == nil {
			t.Errorf("no %s/%s", src, filepath.Base(kf))
		}
	}
	if !strings.Contains(d.Control["postinst"], "DKMS_VERSION="+testVersion+"\n") ||
		!strings.Contains(d.Control["postinst"], "/usr/lib/dkms/common.postinst") {
		t.Errorf("postinst:\n%s", d.Control["postinst"])
	}
	if !strings.Contains(d.Control["prerm"], "dkms remove -m \"$DKMS_NAME\" -v \"$DKMS_VERSION\" --all") {
		t.Errorf("prerm:\n%s", d.Control["prerm"])
	}
	for _, p := range d.paths() {
		if strings.Contains(p, "hinic") {
			t.Errorf("%s: a kernel package path named hinic", p)
		}
	}
}

// TestDKMSBuild gives the hicain-dkms sources to dkms itself (its build
// step, with source and build trees in a temporary directory, so nothing
// is installed): dkms.conf must make dkms build every module. As on any
// DKMS install, dkms signs the modules, creating its key in
// /var/lib/dkms on first use.
func TestDKMSBuild(t *testing.T) {
	r := result(t, sharedBuild(t), pkg.NameDKMS)
	_, err := exec.LookPath("dkms")
	testutil.RequireTool(t, "dkms", "scripts/deps.sh installs it", err == nil)
	d := readDeb(t, r.File)
	sourceTree, dkmsTree := t.TempDir(), t.TempDir()
	for _, e := range d.Data {
		name := strings.TrimPrefix(e.Name, ".")
		rel, ok := strings.CutPrefix(name, "/usr/src/")
		if !ok || e.Type != tar.TypeReg {
			continue
		}
		writeTestFile(t, filepath.Join(sourceTree, rel), string(e.Data))
	}
	cmd := exec.Command("dkms", "build", "-m", pkg.DKMSName, "-v", testVersion, "-k", shared.kernel,
		"--sourcetree", sourceTree, "--dkmstree", dkmsTree)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dkms build: %v\n%s", err, out)
	}
	mods, err := pkg.KbuildModules(shared.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		matches, _ := filepath.Glob(filepath.Join(dkmsTree, pkg.DKMSName, testVersion, shared.kernel, "*", "module", m+".ko*"))
		if len(matches) != 1 {
			t.Errorf("dkms built no %s.ko:\n%s", m, out)
		}
	}
}

func TestProviderPackage(t *testing.T) {
	r := result(t, sharedBuild(t), pkg.NameProvider)
	d := readDeb(t, r.File)
	lib := "/usr/lib/x86_64-linux-gnu/libibverbs/libhicain-rdmav34.so"
	if pkg.DebArch() != "amd64" {
		t.Skipf("the test provider links the amd64 libibverbs path")
	}
	e := d.file(lib)
	if e == nil {
		t.Fatalf("no %s in %v", lib, d.paths())
	}
	so := filepath.Join(t.TempDir(), "p.so")
	if err := os.WriteFile(so, e.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	needed, _ := f.ImportedLibraries()
	syms, _ := f.ImportedSymbols()
	var private bool
	for _, s := range syms {
		private = private || (s.Name == "verbs_register_driver_34" && s.Version == "IBVERBS_PRIVATE_34")
	}
	if f.Type != elf.ET_DYN || f.Section(".symtab") != nil || !slices.Contains(needed, "libibverbs.so.1") || !private {
		t.Errorf("provider: type %v, stripped %v, NEEDED %v, imports verbs_register_driver_34@IBVERBS_PRIVATE_34 %v",
			f.Type, f.Section(".symtab") == nil, needed, private)
	}
	drv := d.file("/etc/libibverbs.d/hicain.driver")
	if drv == nil || string(drv.Data) != "driver hicain\n" {
		t.Errorf("hicain.driver: %+v", drv)
	}
	if d.Control["conffiles"] != "/etc/libibverbs.d/hicain.driver\n" {
		t.Errorf("conffiles = %q", d.Control["conffiles"])
	}
}

func TestProviderAbsent(t *testing.T) {
	repo := newRepo(t, t.TempDir(), false)
	out := t.TempDir()
	results, err := pkg.Build(context.Background(), pkg.Options{Repo: repo, Out: out, Only: []string{pkg.NameProvider}, Epoch: testEpoch, Version: testVersion})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Built || results[0].Note != pkg.NoteProviderAbsent || results[0].File != "" {
		t.Errorf("results %+v", results)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("out has %v", ents)
	}
}

func TestHeadersMissing(t *testing.T) {
	repo := newRepo(t, t.TempDir(), false)
	_, err := pkg.Build(context.Background(), pkg.Options{Repo: repo, Out: t.TempDir(), Only: []string{pkg.NameModules},
		Kernel: "6.1.0-999-none", Epoch: testEpoch, Version: testVersion})
	if !errors.Is(err, pkg.ErrNoHeaders) || !strings.Contains(err.Error(), "apt-get install linux-headers-6.1.0-999-none") ||
		!strings.Contains(err.Error(), "--fix") {
		t.Errorf("err = %v", err)
	}
}

// TestLintian checks that lintian ran on every package and found no
// error, and that every warning it reports is justified in
// docs/packaging.md.
func TestLintian(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join(repoRoot, "docs", "packaging.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sharedBuild(t) {
		if !r.Checked {
			t.Errorf("%s: lintian did not run", r.Name)
		}
		for _, tag := range r.Lintian {
			switch tag.Severity {
			case "E":
				t.Errorf("lintian error: %s", tag)
			case "W":
				row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(tag.Tag) + "` \\|[^\\n]*\\b" + regexp.QuoteMeta(r.Name) + "\\b")
				if !row.Match(docs) {
					t.Errorf("lintian warning %s is not justified in docs/packaging.md's table", tag)
				}
			}
			t.Logf("%s", tag)
		}
	}
}

// TestHicartPackages checks the HiGPU runtime's packages: the library
// with its soname link, shlibs and ldconfig trigger; the development
// files; the tools, linked with the library, with their man pages.
func TestHicartPackages(t *testing.T) {
	results := sharedBuild(t)
	lib := readDeb(t, result(t, results, pkg.NameHicart).File)
	libdir := "/usr/lib/" + multiarchDir(t)
	so := lib.file(libdir + "/" + pkg.HicartLib)
	if so == nil {
		t.Fatalf("libhicart1: no %s in %v", pkg.HicartLib, lib.paths())
	}
	f, err := elf.NewFile(strings.NewReader(string(so.Data)))
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := f.DynString(elf.DT_SONAME); len(name) != 1 || name[0] != pkg.HicartSoname {
		t.Errorf("libhicart1: SONAME %v, want %s", name, pkg.HicartSoname)
	}
	syms, _ := f.DynamicSymbols()
	exported := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF {
			exported[s.Name] = true
		}
	}
	for _, want := range []string{"hicartMalloc", "hicartMemcpyAsync", "hicartReduce", "hicartGetErrorString"} {
		if !exported[want] {
			t.Errorf("libhicart1: %s not exported", want)
		}
	}
	for name := range exported {
		if name != "" && !strings.HasPrefix(name, "hicart") && name != "HICART_1.0" {
			t.Errorf("libhicart1: exports %s, outside the API", name)
		}
	}
	if l := lib.file(libdir + "/" + pkg.HicartSoname); l == nil || l.Type != tar.TypeSymlink || l.Linkname != pkg.HicartLib {
		t.Errorf("libhicart1: %s is not a link to %s", pkg.HicartSoname, pkg.HicartLib)
	}
	if got, want := lib.Control["shlibs"], "libhicart 1 libhicart1 (>= "+testVersion+")\n"; got != want {
		t.Errorf("libhicart1: shlibs %q, want %q", got, want)
	}
	if got := lib.Control["triggers"]; !strings.Contains(got, "activate-noawait ldconfig") {
		t.Errorf("libhicart1: triggers %q", got)
	}

	dev := readDeb(t, result(t, results, pkg.NameHicartDev).File)
	for _, p := range []string{"/usr/include/hicart.h", libdir + "/pkgconfig/hicart.pc", "/usr/share/man/man3/hicart.3.gz"} {
		if dev.file(p) == nil {
			t.Errorf("libhicart-dev: no %s in %v", p, dev.paths())
		}
	}
	if l := dev.file(libdir + "/libhicart.so"); l == nil || l.Type != tar.TypeSymlink || l.Linkname != pkg.HicartSoname {
		t.Errorf("libhicart-dev: libhicart.so is not a link to %s", pkg.HicartSoname)
	}
	if pc := dev.file(libdir + "/pkgconfig/hicart.pc"); pc != nil &&
		(!strings.Contains(string(pc.Data), "libdir="+libdir+"\n") || !strings.Contains(string(pc.Data), "Version: "+pkg.HicartVersion)) {
		t.Errorf("libhicart-dev: hicart.pc:\n%s", pc.Data)
	}

	tools := readDeb(t, result(t, results, pkg.NameHicartTools).File)
	for _, tool := range pkg.HicartTools {
		e := tools.file("/usr/bin/" + tool)
		if e == nil {
			t.Errorf("hicart-tools: no %s in %v", tool, tools.paths())
			continue
		}
		tf, err := elf.NewFile(strings.NewReader(string(e.Data)))
		if err != nil {
			t.Fatal(err)
		}
		if libs, _ := tf.ImportedLibraries(); !slices.Contains(libs, pkg.HicartSoname) {
			t.Errorf("hicart-tools: %s links %v, not %s", tool, libs, pkg.HicartSoname)
		}
		if tools.file("/usr/share/man/man1/"+tool+".1.gz") == nil {
			t.Errorf("hicart-tools: no man page for %s", tool)
		}
	}
}

// multiarchDir is the host's multiarch directory (x86_64-linux-gnu).
func multiarchDir(t *testing.T) string {
	out, err := exec.Command("gcc", "-print-multiarch").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skip("gcc -print-multiarch gives nothing")
	}
	return strings.TrimSpace(string(out))
}
