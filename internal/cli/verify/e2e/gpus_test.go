package e2e

import (
	"testing"

	"github.com/PacketFive/hinic/internal/deploy"
)

// TestServerGPUs: the gate checks the server against its own guest's
// gpus: of the spec, defaults filled in.
func TestServerGPUs(t *testing.T) {
	r, err := deploy.ReadRack("../../../../testdata/racks/two-hicain-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.Guests[1].GPUs = deploy.GPUs{Count: 1, IDs: []int{6}, Memory: 64}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if got := ServerGPUs(r, "vm-a"); len(got) != 2 || got[0].ID != 0 || got[1].ID != 1 || got[1].MemoryMiB != 256 {
		t.Errorf("vm-a: %+v", got)
	}
	if got := ServerGPUs(r, "vm-b"); len(got) != 1 || got[0].ID != 6 || got[0].MemoryMiB != 64 || got[0].HiLink != "hl-sw0" {
		t.Errorf("vm-b: %+v", got)
	}
	// Each GPU with the HiLink switch of its rack, or none.
	for _, x := range ServerGPUs(r, "vm-a") {
		if x.HiLink != "hl-sw0" {
			t.Errorf("vm-a: %+v", x)
		}
	}
	r.Guests[1].GPUs = deploy.GPUs{Count: 1, IDs: []int{6}, Memory: 64, HiLink: deploy.HiLinkNone}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if got := ServerGPUs(r, "vm-b"); len(got) != 1 || got[0].HiLink != "" {
		t.Errorf("vm-b without HiLink: %+v", got)
	}
	r.Guests[0].GPUs = deploy.GPUs{}
	if got := ServerGPUs(r, "vm-a"); len(got) != 0 {
		t.Errorf("no gpus: %+v", got)
	}
}
