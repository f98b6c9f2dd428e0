// Package internal_test holds the module's layering as one table and a
// test that fails on any import outside it, after Go's own
// src/go/build/deps_test.go. ARCHITECTURE.md §3 draws the layers; this
// file is the rule. A change that needs a new edge adds it here, where a
// reviewer sees it.
package internal_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// depsRules lists, lowest first, what each package of the module may
// import (paths under internal/, and cmd/hinic). "a, b < c, d" means c
// and d may import a and b and everything a and b may import; NONE means
// nothing of the module. Every package appears exactly once on the right
// of a "<", after every package on its left.
const depsRules = `
	# Leaves: the standard library and third-party libraries only.
	NONE
	< childproc, clock, godefs, guestmem, hilink/wire, image, ivshmem,
	  metrics/metricstest, mmsg, netns, pattern, pcapfile, pkg, proto, qmp,
	  release, rundir, shmport, unixsock;

	clock < clock/clocktest;
	# The ABI mirrors' generator (go generate) and the tests that check
	# the mirrors are current.
	godefs < godefs/mkgodefs;
	childproc, godefs, netns < testutil;
	# Captures of namespaced links, above proto (whose tests use testutil).
	proto, testutil < testutil/capture;
	unixsock < ctlsock;
	proto < ibsm;

	# The one SMA and PMA of every InfiniBand node: the HCA (rdma), the
	# switch (fabric/ibsw) and the test CA plug into it.
	proto < ibagent;
	ibagent, ibsm < fabric/ibsw/ibswtest;
	clock, ibagent < fabric/ibsw;

	# The transport engine and its test doubles.
	clock, ibagent < rdma;
	rdma < rdma/rdmatest;

	# HiSwitch. fabric and device never import each other: they meet
	# at the port socket's wire format (ARCHITECTURE.md §3).
	fabric/ibsw, mmsg, pcapfile, rundir, shmport, unixsock < fabric;

	# The device backend and its guest simulator. Its fabric link speaks
	# the port wire (proto) and the shared-memory rings (shmport).
	ctlsock, guestmem, ivshmem, mmsg, rdma, shmport, unixsock < device;
	device < device/guestsim;

	# The GPU plane and HiLink reach the NIC's code only through the
	# shared leaves (ARCHITECTURE.md §2.7); a GPU backend's peer
	# copies go over a HiLink endpoint.
	ctlsock, hilink/wire, mmsg, pcapfile, unixsock < hilink;
	ctlsock, guestmem, hilink, ivshmem, unixsock < gpu;
	gpu < gpu/gpusim;

	# The embedded rack and what runs on it.
	fabric, ibsm, rdma < rack;
	pattern, rack < perf;
	perf < verify;
	pattern, rack < faultsuite;

	# Host tooling: deployment and its views. Only the CLI draws racks.
	childproc, image < accel;
	accel, device, fabric, gpu, netns, qmp < deploy;
	deploy < rackview;
	rackview < rackview/live;
	device, fabric, gpu, hilink < metrics;

	# Test-only packages with no code of their own: this file's
	# package (internal) and device's integration tests.
	NONE < internal, device/integration;

	# The command tree: cmdutil under every command, a noun's verbs
	# over its shared package (never one verb over another), the nouns
	# under the root.
	guestmem, unixsock < cli/cmdutil;
	cli/cmdutil < cli/clitest;

	rundir < cli/device/shared, cli/gpu/shared;
	NONE < cli/link/shared;
	cli/cmdutil, deploy < cli/deploy/shared;
	cli/cmdutil, fabric < cli/fabric/shared;

	cli/fabric/shared, metrics < cli/fabric/serve;
	cli/fabric/shared < cli/fabric/status;
	cli/fabric/serve, cli/fabric/status < cli/fabric;

	cli/device/shared, cli/fabric/shared, device, metrics < cli/device/serve;
	cli/cmdutil, cli/device/shared, device < cli/device/status;
	cli/device/serve, cli/device/status < cli/device;

	cli/cmdutil, cli/gpu/shared, gpu, metrics < cli/gpu/serve;
	cli/cmdutil, cli/gpu/shared, gpu < cli/gpu/status;
	cli/gpu/serve, cli/gpu/status < cli/gpu;

	cli/cmdutil, cli/link/shared, hilink, metrics, rundir < cli/link/serve;
	cli/cmdutil, cli/link/shared, hilink, rundir < cli/link/status;
	cli/link/serve, cli/link/status < cli/link;

	cli/cmdutil, fabric < cli/bench/fabric;
	cli/cmdutil, faultsuite, perf < cli/bench/rdma;
	cli/bench/fabric, cli/bench/rdma < cli/bench;

	cli/cmdutil, deploy
	< cli/deploy/cpu, cli/deploy/down, cli/deploy/exec, cli/deploy/inspect,
	  cli/deploy/restart, cli/deploy/schema;
	cli/deploy/shared < cli/deploy/rack;
	cli/cmdutil, rackview < cli/deploy/status;
	cli/deploy/shared, rackview/live < cli/deploy/graph;
	cli/deploy/cpu, cli/deploy/down, cli/deploy/exec, cli/deploy/graph,
	  cli/deploy/inspect, cli/deploy/rack, cli/deploy/restart, cli/deploy/schema,
	  cli/deploy/status
	< cli/deploy;

	cli/cmdutil, image < cli/image/build;
	cli/image/build < cli/image;
	cli/cmdutil, accel, deploy < cli/image/doctor;
	cli/cmdutil, image, pkg < cli/pkg/build;
	cli/pkg/build < cli/pkg;
	cli/cmdutil, hilink/wire, proto < cli/proto/decode;
	cli/proto/decode < cli/proto;
	cli/cmdutil, verify < cli/verify/compare;
	cli/cmdutil, deploy, verify < cli/verify/e2e;
	cli/verify/compare, cli/verify/e2e < cli/verify;

	cli/bench, cli/deploy, cli/device, cli/fabric, cli/gpu, cli/image,
	  cli/image/doctor, cli/link, cli/pkg, cli/proto, cli/verify
	< cli;
	cli < cmd/hinic;
`

// testRules lists what a package's tests (in-package and _test package)
// may import beyond the package itself and what the package may import,
// in the same notation: "a < c" lets c's tests import a and everything a
// may import. A package may appear on the right of several rules.
const testRules = `
	# Test helpers.
	testutil
	< accel, childproc, cli/verify/e2e, deploy, device, device/integration, fabric,
	  faultsuite, gpu, guestmem, pkg, proto, rack, rackview/live, rdma;
	testutil/capture < cli/verify/e2e, rack;
	clock/clocktest < fabric, fabric/ibsw, rdma;
	rdma/rdmatest < rdma;
	fabric/ibsw/ibswtest < fabric/ibsw;
	device/guestsim < device, cli/device;
	gpu/gpusim < gpu, cli/gpu;
	metrics/metricstest < cli/device, cli/fabric, cli/gpu, cli/link;
	cli/clitest < cli, cli/device, cli/fabric, cli/gpu, cli/link, cli/pkg/build;

	# The device backend's integration tests, above device and fabric:
	# simulated guests through a real HiSwitch, and QEMU guests.
	device/guestsim, fabric, ibsm, qmp < device/integration;

	# The fabric noun's tests check what deploy writes into a rack's
	# fabric config.
	deploy < cli/fabric;

	# The link noun's tests decode the switch's capture as a user would.
	cli/proto/decode < cli/link;

	# Tests that run the whole command tree, as main does: commands
	# checked end to end, and deploy's and pkg's tests, which run the
	# test binary as hinic (cli.Main) to start real backends and build
	# real packages, and parse deploy's argv with the serve commands'
	# own parsers.
	cli
	< cli/bench/rdma, cli/deploy/cpu, cli/deploy/exec, cli/deploy/graph, cli/deploy/inspect, cli/deploy/restart,
	  cli/deploy/status, cli/proto/decode, cli/verify/compare, cli/verify/e2e,
	  deploy, pkg;
`

const module = "github.com/PacketFive/hinic/"

// rules is a parsed rule table: for each package, the packages of the
// module it may import, closed under "may import".
type rules map[string]map[string]bool

// parseRules parses depsRules's notation. With base nil every package
// must appear once on the right and its closure is its own; with base
// set (testRules) a package may appear more than once and a left-hand
// name's closure comes from base.
func parseRules(text string, base rules) (rules, error) {
	r := rules{}
	for i, stmt := range strings.Split(stripComments(text), ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		lhs, rhs, ok := strings.Cut(stmt, "<")
		if !ok || strings.Contains(rhs, "<") {
			return nil, fmt.Errorf("rule %d %q: want one \"<\"", i+1, stmt)
		}
		below := map[string]bool{}
		for _, a := range names(lhs) {
			if a == "NONE" {
				continue
			}
			closure := r[a]
			if base != nil {
				closure = base[a]
			}
			if closure == nil {
				return nil, fmt.Errorf("rule %d: %s is used before it is defined", i+1, a)
			}
			below[a] = true
			maps.Copy(below, closure)
		}
		for _, c := range names(rhs) {
			if base == nil && r[c] != nil {
				return nil, fmt.Errorf("rule %d: %s is defined twice", i+1, c)
			}
			for _, a := range names(lhs) {
				if base != nil && (base[c][a] || a == c) {
					return nil, fmt.Errorf("rule %d: %s may import %s already", i+1, c, a)
				}
			}
			if r[c] == nil {
				r[c] = map[string]bool{}
			}
			maps.Copy(r[c], below)
		}
	}
	return r, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		line, _, _ = strings.Cut(line, "#")
		b.WriteString(line)
		b.WriteString("\n")
	}
	return b.String()
}

func names(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// pkgImports is one package of `go list`: its module imports, with the
// module and internal/ prefixes cut.
type pkgImports struct {
	Path        string
	Imports     []string
	TestImports []string // of its _test.go files, both packages
}

// listPackages runs `go list` over the module (with the overlay file, if
// any, as go build -overlay takes it) and returns its packages.
func listPackages(t *testing.T, overlay string) []pkgImports {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	args := []string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.Command("go", append(args, module+"...")...)
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkgImports
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			Error                              *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, pkgImports{
			Path:        short(p.ImportPath),
			Imports:     ours(p.Imports),
			TestImports: ours(append(p.TestImports, p.XTestImports...)),
		})
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

func short(path string) string {
	path = strings.TrimPrefix(path, module)
	if p, ok := strings.CutPrefix(path, "internal/"); ok {
		return p
	}
	return path
}

func ours(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if strings.HasPrefix(imp, module) {
			out = append(out, short(imp))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkDeps returns one line per import the rules do not allow, and per
// package the rules do not name or name without it existing.
func checkDeps(pkgs []pkgImports, deps, tests rules) []string {
	var bad []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.Path] = true
		allowed, ok := deps[p.Path]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is not in depsRules", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			if !allowed[imp] {
				bad = append(bad, fmt.Sprintf("%s imports %s", p.Path, imp))
			}
		}
		for _, imp := range p.TestImports {
			if imp != p.Path && !allowed[imp] && !tests[p.Path][imp] {
				bad = append(bad, fmt.Sprintf("%s's tests import %s", p.Path, imp))
			}
		}
	}
	for _, r := range []rules{deps, tests} {
		for name := range r {
			if !seen[name] {
				bad = append(bad, fmt.Sprintf("the rules name %s, which is no package", name))
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

func parseAll(t *testing.T) (deps, tests rules) {
	t.Helper()
	deps, err := parseRules(depsRules, nil)
	if err != nil {
		t.Fatalf("depsRules: %v", err)
	}
	tests, err = parseRules(testRules, deps)
	if err != nil {
		t.Fatalf("testRules: %v", err)
	}
	return deps, tests
}

// TestDependencies checks every import of every package of the module,
// tests included, against the tables.
func TestDependencies(t *testing.T) {
	deps, tests := parseAll(t)
	for _, b := range checkDeps(listPackages(t, ""), deps, tests) {
		t.Error(b)
	}
}

// TestDependenciesCatchPlanted plants, through go list's overlay (no file
// of the tree changes), an upward import in a package and one in a
// package's test, and checks that the check reports exactly those.
func TestDependenciesCatchPlanted(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the module three more times")
	}
	deps, tests := parseAll(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		file, src, want string
	}{
		// The switch must never import the device backend.
		{"internal/fabric/zz_planted.go", "package fabric\n\nimport _ \"" + module + "internal/device\"\n",
			"fabric imports device"},
		// The wire formats import the standard library only.
		{"internal/proto/zz_planted.go", "package proto\n\nimport _ \"" + module + "internal/clock\"\n",
			"proto imports clock"},
		// device's own tests must not bring up a fabric: that is what
		// device/integration is for.
		{"internal/device/zz_planted_test.go", "package device_test\n\nimport _ \"" + module + "internal/fabric\"\n",
			"device's tests import fabric"},
	} {
		t.Run(filepath.Base(filepath.Dir(tc.file)), func(t *testing.T) {
			src := filepath.Join(dir, filepath.Base(tc.file))
			if err := os.WriteFile(src, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, tc.file): src}})
			if err != nil {
				t.Fatal(err)
			}
			ov := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			got := checkDeps(listPackages(t, ov), deps, tests)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("planted %s: the check reports %q, want only %q", tc.file, got, tc.want)
			}
		})
	}
}

// TestParseRules checks the notation's own errors.
func TestParseRules(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"NONE < a; a < b; b < a;", "a is defined twice"},
		{"NONE < a; c < b;", "c is used before it is defined"},
		{"NONE < a < b;", "want one"},
	} {
		if _, err := parseRules(tc.text, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
	r, err := parseRules("NONE < a; a < b; b, x0 < c;", nil)
	if err == nil {
		t.Fatalf("x0 undefined: got %v", r)
	}
	r, err = parseRules("NONE < a, x; a < b; b < c;", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r["c"]["a"] || !r["c"]["b"] || r["c"]["x"] || r["a"]["b"] || len(r["a"]) != 0 {
		t.Errorf("closure: %v", r)
	}
}
