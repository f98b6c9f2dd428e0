package hilink_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLayering writes HiLink's layering down (ARCHITECTURE.md §2.7): the
// switch reaches the rest of the project only through shared leaf
// packages (which import nothing of the project themselves), never the NIC's device, rdma or fabric packages, and the
// wire format imports nothing of the project.
func TestLayering(t *testing.T) {
	const mod = "github.com/PacketFive/hinic/internal/"
	for _, tc := range []struct {
		pkg  string
		only []string // the only packages of the module it may import
	}{
		{pkg: "./", only: []string{"hilink", "hilink/wire", "mmsg", "unixsock", "ctlsock", "pcapfile"}},
		{pkg: "./wire", only: []string{"hilink/wire"}},
		{pkg: "../pcapfile", only: []string{"pcapfile"}},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if name, ok := strings.CutPrefix(dep, mod); ok && !slices.Contains(tc.only, name) {
				t.Errorf("%s imports %s", tc.pkg, dep)
			}
		}
	}
}
