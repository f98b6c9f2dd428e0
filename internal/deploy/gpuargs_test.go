package deploy_test

import (
	"testing"

	"github.com/PacketFive/hinic/internal/cli/gpu/serve"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/guestmem"
)

// TestGPUArgsParse feeds the rack's --gpu values to the parser of
// `hinic gpu serve`: what deploy writes is what the backend reads, and
// each GPU matches its guest's QEMU (RAM file and size, machine,
// vectors) and the spec (id, device memory).
func TestGPUArgsParse(t *testing.T) {
	r := &deploy.Rack{RunDir: "/tmp/hr", Guests: []deploy.Guest{
		{Name: "vm-a", NIC: deploy.NICHicain, Memory: 1536, GPUs: deploy.GPUs{Count: 2, Memory: 512, IDs: []int{1, 6}}},
		{Name: "vm-b", GPUs: deploy.GPUs{Count: 1}},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	args := deploy.GPUArgs(r)
	var specs []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--gpu" {
			specs = append(specs, args[i+1])
		}
	}
	type want struct {
		g  deploy.Guest
		id int
	}
	wants := []want{{r.Guests[0], 1}, {r.Guests[0], 6}, {r.Guests[1], 0}}
	if len(specs) != len(wants) {
		t.Fatalf("%d --gpu in %q", len(specs), args)
	}
	for i, s := range specs {
		c, err := serve.ParseGPU(s)
		if err != nil {
			t.Fatalf("--gpu %q: %v", s, err)
		}
		w := wants[i]
		if c.Socket != deploy.GPUSocket(r, w.g, w.id) || c.RAMPath != deploy.GuestRAM(r, w.g) ||
			c.RAMSize != uint64(w.g.Memory)<<20 || c.Machine != guestmem.Machine(deploy.QEMUMachine) ||
			c.ID != w.id || c.MemSize != uint64(w.g.GPUs.Memory)<<20 || c.Vectors != 4 {
			t.Errorf("GPU %d: %+v", i, c)
		}
	}
}
