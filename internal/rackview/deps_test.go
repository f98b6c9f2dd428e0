package rackview_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering writes the drawing's place in the layering down
// (ARCHITECTURE.md §3): the CLI imports rackview and rackview/live, never
// the reverse; they read racks through deploy (and the fabric's and
// device backend's status types), and nothing below the CLI imports
// them.
func TestLayering(t *testing.T) {
	const mod = "github.com/PacketFive/hinic/internal/"
	for _, pkg := range []string{"./", "./live"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, mod+"cli") || strings.HasPrefix(dep, mod+"verify") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
	// Only the CLI (and rackview's own packages) import rackview.
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], mod+"cli") || strings.HasPrefix(f[0], mod+"rackview") {
			continue
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod+"rackview") {
				t.Errorf("%s imports %s; only the CLI draws racks", f[0], imp)
			}
		}
	}
}
