package gpu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/guestmem"
)

// The GPU backend maps two files of a guest's: its RAM and the GPU's
// device memory. A symbolic link in place of either is refused, and the
// file it names is left as it was.
func TestStartRefusesSymlinkedMemoryFiles(t *testing.T) {
	for _, which := range []string{"ram", "devmem"} {
		t.Run(which, func(t *testing.T) {
			dir := shortDir(t)
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, which)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			cfg := gpu.GPUConfig{ID: 2, Socket: filepath.Join(dir, "gpu.sock"),
				RAMPath: filepath.Join(dir, "ram"), RAMSize: testRAM, Machine: "q35",
				MemPath: filepath.Join(dir, "devmem"), MemSize: testMem}
			srv, err := gpu.Start(context.Background(), gpu.Config{GPUs: []gpu.GPUConfig{cfg}})
			if err == nil {
				srv.Close()
				t.Fatalf("Start accepted a symlinked %s", which)
			}
			if !errors.Is(err, guestmem.ErrUnsafeFile) || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), link) {
				t.Fatalf("Start = %v; want ErrUnsafeFile naming the link %s", err, link)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
				t.Errorf("the link's target is now %q, %v", b, err)
			}
		})
	}
}
