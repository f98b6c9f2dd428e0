package release

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const modulePath = "github.com/PacketFive/hinic"

// repoRoot is where go.mod is, two levels above this package.
var repoRoot = filepath.Join("..", "..")

// config is the part of .goreleaser.yaml these tests look at.
type config struct {
	Version int `yaml:"version"`
	Builds  []struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Binary  string   `yaml:"binary"`
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Nfpms   []any `yaml:"nfpms"`
	Release struct {
		Disable bool `yaml:"disable"`
	} `yaml:"release"`
}

func loadConfig(t *testing.T) config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c config
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&c); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	return c
}

func TestGoreleaserBuild(t *testing.T) {
	c := loadConfig(t)
	if c.Version != 2 {
		t.Errorf("version = %d, want 2", c.Version)
	}
	if len(c.Builds) != 1 {
		t.Fatalf("%d builds, want 1", len(c.Builds))
	}
	b := c.Builds[0]
	if b.Main != "./cmd/hinic" {
		t.Errorf("main = %q, want ./cmd/hinic", b.Main)
	}
	if b.Binary != "hinic" {
		t.Errorf("binary = %q, want hinic", b.Binary)
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("env = %q, want CGO_ENABLED=0", b.Env)
	}
	if !slices.Equal(b.Goos, []string{"linux"}) {
		t.Errorf("goos = %q, want [linux]", b.Goos)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		if !slices.Contains(b.Goarch, arch) {
			t.Errorf("goarch = %q, lacks %s", b.Goarch, arch)
		}
	}
	if !slices.Contains(b.Flags, "-trimpath") {
		t.Errorf("flags = %q, want -trimpath", b.Flags)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, b.Main, "main.go")); err != nil {
		t.Errorf("main %s: %v", b.Main, err)
	}
	if !c.Release.Disable {
		t.Error("release.disable is not true; there is no remote to publish to")
	}
	// internal/pkg's tests compare the hinic .deb with hinic pkg build's.
	if len(c.Nfpms) != 1 {
		t.Errorf("%d nfpms entries, want 1 (the hinic host package)", len(c.Nfpms))
	}
}

// xFlag matches one -X importpath.name=value in ldflags.
var xFlag = regexp.MustCompile(`-X[ =]([^\s=]+)\.([A-Za-z_][A-Za-z0-9_]*)=`)

// TestLdflagsVariablesExist checks that each -X in .goreleaser.yaml names
// a package-level string variable that exists (the linker silently
// ignores a -X for a missing one), and that the Makefile sets the same
// ones.
func TestLdflagsVariablesExist(t *testing.T) {
	c := loadConfig(t)
	ld := strings.Join(c.Builds[0].Ldflags, " ")
	vars := map[string][]string{} // import path -> variables
	for _, m := range xFlag.FindAllStringSubmatch(ld, -1) {
		vars[m[1]] = append(vars[m[1]], m[2])
	}
	want := map[string][]string{modulePath + "/internal/cli": {"version", "commit", "date"}}
	for pkg, names := range want {
		for _, n := range names {
			if !slices.Contains(vars[pkg], n) {
				t.Errorf("ldflags do not set %s.%s", pkg, n)
			}
		}
	}

	for pkg, names := range vars {
		rel, ok := strings.CutPrefix(pkg, modulePath+"/")
		if !ok {
			t.Errorf("-X %s: not a package of %s", pkg, modulePath)
			continue
		}
		declared := stringVars(t, filepath.Join(repoRoot, filepath.FromSlash(rel)))
		for _, n := range names {
			if !declared[n] {
				t.Errorf("-X %s.%s: no package-level string variable %s in %s", pkg, n, n, rel)
			}
		}
	}

	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := string(makefile)
	if !strings.Contains(mk, "CLI_PKG := "+modulePath+"/internal/cli\n") {
		t.Errorf("Makefile does not define CLI_PKG := %s/internal/cli", modulePath)
	}
	for _, n := range want[modulePath+"/internal/cli"] {
		if !strings.Contains(mk, "-X $(CLI_PKG)."+n+"=") {
			t.Errorf("Makefile does not set -X $(CLI_PKG).%s", n)
		}
	}
}

// stringVars returns the package-level variables of the Go package in dir
// declared with type string, the only kind -X can set.
func stringVars(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "string" {
					continue
				}
				for _, n := range vs.Names {
					vars[n.Name] = true
				}
			}
		}
	}
	return vars
}
