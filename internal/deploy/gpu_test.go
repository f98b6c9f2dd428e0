package deploy

import (
	"slices"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/image"
)

// TestGPUDefaults: ids default to 0..count-1 and memory to 256 MiB; a
// guest without gpus: has none.
func TestGPUDefaults(t *testing.T) {
	r := &Rack{RunDir: "/tmp/hr", Guests: []Guest{
		{Name: "a", NIC: NICHicain, GPUs: GPUs{Count: 2}},
		{Name: "b", GPUs: GPUs{Count: 3, Memory: 64, IDs: []int{7, 2, 5}}},
		{Name: "c"},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	a, b, c := r.Guests[0].GPUs, r.Guests[1].GPUs, r.Guests[2].GPUs
	if a.Memory != DefaultGPUMemory || len(a.IDs) != 2 || a.IDs[0] != 0 || a.IDs[1] != 1 {
		t.Errorf("a: %+v", a)
	}
	if b.Memory != 64 || len(b.IDs) != 3 || b.IDs[0] != 7 {
		t.Errorf("b: %+v", b)
	}
	if c.Count != 0 || c.IDs != nil {
		t.Errorf("c: %+v", c)
	}
	if n := len(r.gpuGuests()); n != 2 || r.gpuCount() != 5 || len(r.ramGuests()) != 2 {
		t.Errorf("%d guests with GPUs, %d GPUs, %d RAM files", n, r.gpuCount(), len(r.ramGuests()))
	}
}

func TestGPUErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		g    GPUs
		want string
	}{
		"count 9":          {GPUs{Count: 9}, "count 9: want 0 to 8"},
		"count -1":         {GPUs{Count: -1}, "count -1"},
		"ids without":      {GPUs{IDs: []int{0}}, "with count 0"},
		"memory without":   {GPUs{Memory: 64}, "with count 0"},
		"too few ids":      {GPUs{Count: 2, IDs: []int{0}}, "1 ids [0] for count 2"},
		"too many ids":     {GPUs{Count: 1, IDs: []int{0, 1}}, "2 ids [0 1] for count 1"},
		"duplicate id":     {GPUs{Count: 2, IDs: []int{3, 3}}, "id 3 given twice"},
		"id 8":             {GPUs{Count: 1, IDs: []int{8}}, "id 8: want 0 to 7"},
		"negative id":      {GPUs{Count: 1, IDs: []int{-1}}, "id -1"},
		"memory too small": {GPUs{Count: 1, Memory: 8}, "memory 8 MiB: want 32 to 65536"},
		"memory too large": {GPUs{Count: 1, Memory: 65537}, "memory 65537 MiB"},
		"memory negative":  {GPUs{Count: 1, Memory: -256}, "memory -256 MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Rack{Guests: []Guest{{Name: "vm-x", GPUs: tc.g}}}
			err := r.Defaults()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "guest vm-x: gpus:") {
				t.Errorf("err %v, want one naming guest vm-x and %q", err, tc.want)
			}
		})
	}
}

// TestParseRackGPUs reads gpus: in both YAML forms and refuses unknown
// keys under it.
func TestParseRackGPUs(t *testing.T) {
	r, err := ParseRack([]byte("guests:\n  - name: a\n    gpus: {count: 2, memory: 128, ids: [4, 5]}\n" +
		"  - name: b\n    gpus:\n      count: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if g := r.Guests[0].GPUs; g.Count != 2 || g.Memory != 128 || g.IDs[1] != 5 {
		t.Errorf("a: %+v", g)
	}
	if g := r.Guests[1].GPUs; g.Count != 1 || g.IDs[0] != 0 || g.Memory != DefaultGPUMemory {
		t.Errorf("b: %+v", g)
	}
	for _, bad := range []string{
		"guests:\n  - name: a\n    gpus: {count: 1, mem: 64}\n",
		"guests:\n  - name: a\n    gpus: {count: two}\n",
		"guests:\n  - name: a\n    gpus: {count: 1, ids: 0}\n",
		"guests:\n  - name: a\n    gpus: 2\n",
	} {
		if _, err := ParseRack([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestExampleGPURack(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/two-hicain-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	if len(r.Guests) != 2 {
		t.Fatalf("guests %+v", r.Guests)
	}
	// One rack, its four GPUs on its HiLink switch, gpu_ids 0 to 3 on
	// ports 0 to 3.
	for i, g := range r.Guests {
		if g.NIC != NICHicain || g.GPUs.Count != 2 || g.GPUs.Memory != 256 || len(g.GPUs.IDs) != 2 ||
			g.GPUs.IDs[0] != 2*i || g.GPUs.IDs[1] != 2*i+1 || g.GPUs.HiLink != "hl-sw0" ||
			!slices.Equal(g.GPUs.HiLinkPorts, []int{2 * i, 2*i + 1}) {
			t.Errorf("guest %s: %+v", g.Name, g)
		}
	}
}

// TestGPUQEMUArgs: a hicain guest's GPUs follow its vNIC, one chardev
// and ivshmem function each, on the one RAM file; an rxe guest with a
// GPU gets the RAM file too; a guest without none.
func TestGPUQEMUArgs(t *testing.T) {
	r := &Rack{RunDir: "/tmp/hr", Guests: []Guest{
		{Name: "vm-a", NIC: NICHicain, GPUs: GPUs{Count: 2, IDs: []int{0, 3}}},
		{Name: "vm-r", GPUs: GPUs{Count: 1, HiLink: HiLinkNone}},
		{Name: "vm-n"},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	m := &image.Manifest{Cmdline: "root=/dev/vda rw"}
	a := strings.Join(QEMUArgs(r, r.Guests[0], m, "/img", "/tmp/hr/vm-a", "tcg", "k"), " ")
	for _, want := range []string{
		"-machine pc,memory-backend=ram0 -object memory-backend-file,id=ram0,size=1024M,mem-path=/tmp/hr/vm-a/ram,share=on ",
		"-chardev socket,path=/tmp/hr/vm-a/ivshmem.sock,id=ivs0 -device ivshmem-doorbell,chardev=ivs0,vectors=8,id=hicain0 " +
			"-chardev socket,path=/tmp/hr/vm-a/gpu0.sock,id=gpu0 -device ivshmem-doorbell,chardev=gpu0,vectors=4 " +
			"-chardev socket,path=/tmp/hr/vm-a/gpu3.sock,id=gpu3 -device ivshmem-doorbell,chardev=gpu3,vectors=4 ",
	} {
		if !strings.Contains(a, want) {
			t.Errorf("vm-a: no %q in\n%s", want, a)
		}
	}
	if n := strings.Count(a, "-machine"); n != 1 {
		t.Errorf("vm-a: %d -machine options:\n%s", n, a)
	}
	rx := strings.Join(QEMUArgs(r, r.Guests[1], m, "/img", "/tmp/hr/vm-r", "tcg", "k"), " ")
	for _, want := range []string{
		"-machine pc,memory-backend=ram0 -object memory-backend-file,id=ram0,size=1024M,mem-path=/tmp/hr/vm-r/ram,share=on ",
		"-device virtio-net-pci,netdev=data,mac=52:54:00:42:00:02 ",
		"-chardev socket,path=/tmp/hr/vm-r/gpu0.sock,id=gpu0 -device ivshmem-doorbell,chardev=gpu0,vectors=4 ",
	} {
		if !strings.Contains(rx, want) {
			t.Errorf("vm-r: no %q in\n%s", want, rx)
		}
	}
	n := strings.Join(QEMUArgs(r, r.Guests[2], m, "/img", "/tmp/hr/vm-n", "tcg", "k"), " ")
	if strings.Contains(n, "gpu") || strings.Contains(n, "memory-backend") || !strings.Contains(n, "-machine pc ") {
		t.Errorf("vm-n has a GPU or a RAM file:\n%s", n)
	}
}

func TestGPUArgs(t *testing.T) {
	r := &Rack{RunDir: "/tmp/hr", Guests: []Guest{
		{Name: "vm-a", NIC: NICHicain, Memory: 2048, GPUs: GPUs{Count: 2, Memory: 128}},
		{Name: "vm-b", NIC: NICHicain},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(GPUArgs(r), " ")
	want := "gpu serve --control /tmp/hr/gpu.sock " +
		"--gpu socket=/tmp/hr/vm-a/gpu0.sock,ram=/tmp/hr/vm-a/ram,ram-size=2048M,machine=pc,id=0,mem-size=128M,vectors=4," +
		"hilink=/tmp/hr/hilink/hl-sw0/hilink-port0.sock,link-name=vm-a/gpu0 " +
		"--gpu socket=/tmp/hr/vm-a/gpu1.sock,ram=/tmp/hr/vm-a/ram,ram-size=2048M,machine=pc,id=1,mem-size=128M,vectors=4," +
		"hilink=/tmp/hr/hilink/hl-sw0/hilink-port1.sock,link-name=vm-a/gpu1"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !hasRun(append([]string{"hinic"}, GPUArgs(r)...), gpuProc(r, "").args) {
		t.Error("the GPU backend's command line is not its proc's")
	}
}

func TestGPUCheckPaths(t *testing.T) {
	long := "vm-" + strings.Repeat("a", 92)
	for name, tc := range map[string]struct {
		runDir, guest string
		ok            bool
	}{
		"short":             {"/tmp/hr", "vm-a", true},
		"GPU socket long":   {"/tmp/hr", long, false},
		"comma, rxe + GPUs": {"/tmp/a,b", "vm-a", false},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Rack{RunDir: tc.runDir, Guests: []Guest{{Name: tc.guest, GPUs: GPUs{Count: 1}}}}
			if err := r.Defaults(); err != nil {
				t.Fatal(err)
			}
			if err := checkPaths(r); (err == nil) != tc.ok {
				t.Errorf("err %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestGPUInfos lines the backend's status up with the spec by socket.
func TestGPUInfos(t *testing.T) {
	r := &Rack{RunDir: "/tmp/hr", Guests: []Guest{
		{Name: "vm-a", GPUs: GPUs{Count: 2}},
		{Name: "vm-b", GPUs: GPUs{Count: 1, IDs: []int{4}, Memory: 64}},
		{Name: "vm-c"},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	s := &gpu.Status{GPUs: []gpu.GPUStatus{
		{ID: 0, Socket: GPUSocket(r, r.Guests[0], 0), State: "live", MemUsed: 1 << 20, Contexts: 2, Util: 0.5},
		{ID: 4, Socket: GPUSocket(r, r.Guests[1], 4), State: "fatal", FatalCode: 3},
		{ID: 1, Socket: "/elsewhere/gpu1.sock", State: "live"},
	}}
	got := gpuInfos(r, s, "running")
	want := []GPUInfo{
		{Guest: "vm-a", ID: 0, MemoryMiB: 256, State: "live", MemUsed: 1 << 20, Contexts: 2, Util: 0.5},
		{Guest: "vm-a", ID: 1, MemoryMiB: 256, State: "absent"},
		{Guest: "vm-b", ID: 4, MemoryMiB: 64, State: "fatal", Fatal: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("GPU %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, gi := range gpuInfos(r, nil, "stopped") {
		if gi.State != "stopped" {
			t.Errorf("backend stopped: %+v", gi)
		}
	}
}

// FuzzParseRack: any YAML gives a rack or a *SpecError, and Defaults
// then an error or a rack whose GPUs are within bounds.
func FuzzParseRack(f *testing.F) {
	for _, s := range []string{
		"",
		"name: x\nguests: []\n",
		"guests:\n  - name: a\n    nic: hicain\n    gpus: {count: 2, memory: 256, ids: [0, 1]}\n",
		"guests:\n  - name: a\n    gpus: {count: 8}\n  - name: b\n    gpus: {count: 1, ids: [7]}\n",
		"guests:\n  - name: a\n    gpus: {count: 2, ids: [1, 1]}\n",
		"guests:\n  - name: a\n    gpus: {count: 9}\n",
		"guests:\n  - name: a\n    gpus: {count: 1, memory: 99999999999}\n",
		"guests:\n  - name: a\n    link: ib\n    nic: hicain\nopensm: a\n",
		"switches: [{name: sw0, ports: 2}]\nguests: [{name: a, port: 3}]\n",
		"mtu: 9000\nnetwork: 10.46.0.0/24\nboot-timeout: 90s\n",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte("guests:\n  - nic: foo\n"))
	f.Add([]byte("links: [{a: sw0, b: 'sw1:x'}]\nx: &a [1]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRack(b)
		if err != nil {
			// Every refusal says where: a *SpecError.
			if _, ok := AsSpecError(err); !ok {
				t.Fatalf("%T: %v", err, err)
			}
			return
		}
		if r.RunDir == "" {
			r.RunDir = "/tmp/hr"
		}
		if err := r.Defaults(); err != nil {
			return
		}
		for _, g := range r.Guests {
			c := g.GPUs
			if c.Count < 0 || c.Count > MaxGuestGPUs || len(c.IDs) != c.Count {
				t.Fatalf("guest %s: %+v", g.Name, c)
			}
			if c.Count > 0 && (c.Memory < MinGPUMemory || c.Memory > MaxGPUMemory) {
				t.Fatalf("guest %s: memory %d", g.Name, c.Memory)
			}
			seen := map[int]bool{}
			for _, id := range c.IDs {
				if id < 0 || id >= MaxGuestGPUs || seen[id] {
					t.Fatalf("guest %s: ids %v", g.Name, c.IDs)
				}
				seen[id] = true
			}
			_ = GPUArgs(r)
		}
	})
}
