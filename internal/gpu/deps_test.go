package gpu_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLayering writes the GPU plane's layering down (ARCHITECTURE.md
// §2.7): the backend and its simulator reach the NIC's code only through
// the shared leaf packages, and those import nothing of the project.
func TestLayering(t *testing.T) {
	const mod = "github.com/PacketFive/hinic/internal/"
	for _, tc := range []struct {
		pkg    string
		banned []string // packages of the module it must not import
		only   []string // or: the only packages of the module it may import
	}{
		{pkg: "./", banned: []string{"device", "rdma", "fabric", "proto", "shmport", "cli"}},
		{pkg: "./gpusim", banned: []string{"device", "rdma", "fabric", "proto", "shmport", "cli"}},
		{pkg: "../guestmem", only: []string{"guestmem"}},
		{pkg: "../ivshmem", only: []string{"ivshmem"}},
		{pkg: "../ctlsock", only: []string{"ctlsock", "unixsock"}},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			name, ok := strings.CutPrefix(dep, mod)
			if !ok {
				continue
			}
			top, _, _ := strings.Cut(name, "/")
			if slices.Contains(tc.banned, top) || (tc.only != nil && !slices.Contains(tc.only, top)) {
				t.Errorf("%s imports %s", tc.pkg, dep)
			}
		}
	}
}
