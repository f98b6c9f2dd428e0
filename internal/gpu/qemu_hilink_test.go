package gpu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/testutil"
)

// hilinkGuestInit is /init of a guest of TestQEMUHiLink; %[1]s is the
// other guest's gpu_ids, %[2]s the guest's name, %[3]d the largest
// all-reduce in bytes. The topology first, then the peer tests of the
// guest's two GPUs, then hicart-p2p and hicart-allreduce, which run in
// both guests at once and meet over the fabric.
const hilinkGuestInit = guestInitHead + `insmod /higpu.ko && echo HL-INSMOD-OK
sleep 1
hicart-smi topo --remote %[1]s; echo HL-TOPO rc=$?
echo HL-TOPOJSON-BEGIN; hicart-smi topo --json --remote %[1]s; echo HL-TOPOJSON rc=$?
hicart_test -d 0 -p; echo HL-PEERTEST rc=$?
hicart-p2p --remote %[1]s --size 262144 --iters 4 --timeout 900; echo HL-P2P rc=$?
echo HL-P2PJSON-BEGIN; hicart-p2p --remote %[1]s --size 65536 --iters 2 --json --timeout 900; echo HL-P2PJSON rc=$?
hicart-allreduce --remote %[1]s --max-bytes %[3]d --timeout 900; echo HL-ALLREDUCE rc=$?
rmmod higpu && echo HL-RMMOD-OK
echo HL-DONE-%[2]s
poweroff -f
`

// TestQEMUHiLink boots two TCG guests with two HiGPUs each (gpu_ids 0
// and 1 in guest a, 2 and 3 in guest b), all four on one HiLink switch
// in this process, and runs in each: hicart-smi topo (every pair HL),
// hicart_test -p (peer copies between the guest's GPUs, both ways, every
// byte checked, and the peer errors), hicart-p2p over all four GPUs
// (both guests measure, taking turns) and hicart-allreduce over the
// four-GPU ring across the two guests, f32 and bf16 from 4 B up, every
// element compared with the CPU reference. Both guests must pass every
// step, and the switch must have forwarded frames on every port with
// nothing dropped.
func TestQEMUHiLink(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two VMs")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	kdir := testutil.BuildModules(t, release, "../../kernel", "higpu.o", "higpu.ko")
	hc := buildHicart(t)
	maxBytes := 64 << 20
	if v := os.Getenv("HINIC_HILINK_ALLREDUCE_MAX"); v != "" {
		fmt.Sscan(v, &maxBytes)
	}

	dir := shortDir(t)
	sw := startSwitch(t, hilink.Config{RunDir: filepath.Join(dir, "hl"), Ports: 4})
	const ramMiB = 1024
	guests := []struct {
		name   string
		ids    []int
		remote string
	}{{"a", []int{0, 1}, "2,3"}, {"b", []int{2, 3}, "0,1"}}
	var cfgs []gpu.GPUConfig
	for _, g := range guests {
		for _, id := range g.ids {
			cfgs = append(cfgs, gpu.GPUConfig{ID: id, Name: fmt.Sprintf("HiGPU-%d", id),
				Socket: sockPath(dir, id), RAMPath: filepath.Join(dir, "ram-"+g.name),
				RAMSize: ramMiB << 20, Machine: "q35", MemSize: 256 << 20,
				HiLink: hilink.PortPath(sw.Config().RunDir, id), LinkName: fmt.Sprintf("vm-%s/gpu%d", g.name, id)})
		}
	}
	srv, err := gpu.Start(context.Background(), gpu.Config{GPUs: cfgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	bins := []string{"hicart-smi", "hicart_test", "hicart-p2p", "hicart-allreduce"}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cons := make([]string, len(guests))
	var wg sync.WaitGroup
	for i, g := range guests {
		initrd := filepath.Join(dir, "initrd-"+g.name)
		hicartInitrd(t, initrd, busybox, fmt.Sprintf(hilinkGuestInit, g.remote, g.name, maxBytes), kdir, hc, bins)
		var socks []string
		for _, id := range g.ids {
			socks = append(socks, sockPath(dir, id))
		}
		q := testutil.StartQEMU(t, ctx, "hilink guest "+g.name, "HL-", qemu,
			gpuGuestArgs(ramMiB, filepath.Join(dir, "ram-"+g.name), kernel, initrd, socks...)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.Wait(ctx, t, "HL-DONE-"+g.name)
			cons[i] = q.Out.String()
		}()
	}
	wg.Wait()

	for i, g := range guests {
		con := cons[i]
		for _, l := range strings.Split(con, "\n") {
			if strings.Contains(l, "HL-") || strings.Contains(l, "not ok") || strings.HasPrefix(strings.TrimSpace(l), "#") ||
				strings.Contains(l, "GPU") || strings.Contains(l, "Matrix") || strings.Contains(l, `D\D`) ||
				tableRow.MatchString(strings.TrimRight(l, "\r")) || strings.Contains(l, "hicart") {
				t.Logf("%s: %s", g.name, strings.TrimRight(l, "\r"))
			}
		}
		for _, want := range []string{"HL-INSMOD-OK", "HL-TOPO rc=0", "HL-TOPOJSON rc=0", "HL-PEERTEST rc=0",
			"HL-P2P rc=0", "HL-P2PJSON rc=0", "HL-ALLREDUCE rc=0", "HL-RMMOD-OK", "# Out of bounds values : 0 OK"} {
			if !strings.Contains(con, want) {
				t.Errorf("guest %s: console lacks %q", g.name, want)
			}
		}
		for _, bad := range []string{"Oops", "BUG:", "WARNING:", "Call Trace", "not ok "} {
			if strings.Contains(con, bad) {
				t.Errorf("guest %s: console has %q", g.name, bad)
			}
		}
		// The topology: four GPUs, every pair over HiLink.
		var topo struct {
			GPUs []struct {
				GPUID int `json:"gpu_id"`
			} `json:"gpus"`
			Matrix [][]string `json:"matrix"`
		}
		if err := json.Unmarshal([]byte(lineAfter(con, "HL-TOPOJSON-BEGIN")), &topo); err != nil {
			t.Errorf("guest %s: topo --json: %v", g.name, err)
		} else if len(topo.GPUs) != 4 || len(topo.Matrix) != 4 {
			t.Errorf("guest %s: topo %+v", g.name, topo)
		} else {
			for a := range 4 {
				for b := range 4 {
					want := "HL"
					if a == b {
						want = "X"
					}
					if topo.Matrix[a][b] != want {
						t.Errorf("guest %s: topo[%d][%d] = %q, want %q", g.name, a, b, topo.Matrix[a][b], want)
					}
				}
			}
		}
		// p2p: this guest's rows measured (a positive figure to every
		// GPU), the other guest's rows left to it.
		var p2p struct {
			GPUs []struct {
				GPUID int  `json:"gpu_id"`
				Local bool `json:"local"`
			} `json:"gpus"`
			BW [][]*float64 `json:"bandwidth_gbps"`
		}
		if err := json.Unmarshal([]byte(lineAfter(con, "HL-P2PJSON-BEGIN")), &p2p); err != nil || len(p2p.BW) != 4 {
			t.Errorf("guest %s: p2p --json: %v (%d rows)", g.name, err, len(p2p.BW))
		} else {
			for a, row := range p2p.BW {
				for b, v := range row {
					if p2p.GPUs[a].Local != (v != nil) || (v != nil && *v <= 0) {
						t.Errorf("guest %s: p2p[%d][%d] = %v (local %v)", g.name, a, b, v, p2p.GPUs[a].Local)
					}
				}
			}
		}
		// Every size of both types in the all-reduce table.
		rows := regexp.MustCompile(`(?m)^\s+\d+\s+\d+\s+(float|bf16)\s+sum\s+\S+\s+\S+\s+\S+\s+0$`).FindAllString(con, -1)
		sizes := 0
		for b := 4; b <= maxBytes; b *= 2 {
			sizes++
		}
		if len(rows) != 2*sizes {
			t.Errorf("guest %s: %d all-reduce rows with no wrong element, want %d", g.name, len(rows), 2*sizes)
		}
	}
	st := sw.Status()
	for _, p := range st.Ports {
		t.Logf("hilink port %d (%s): rx %d frames %d B, tx %d frames %d B, stalls %d, drops %v",
			p.Num, p.Peer, p.Counters.RxFrames, p.Counters.RxBytes, p.Counters.TxFrames, p.Counters.TxBytes,
			p.Counters.CreditStalls, p.Counters.Drops)
		if p.Counters.RxFrames == 0 || p.Counters.TxFrames == 0 {
			t.Errorf("port %d carried nothing", p.Num)
		}
	}
	for _, gs := range srv.Status().GPUs {
		l := gs.Link
		t.Logf("gpu %d: %d peer ops (%d failed), %d B out; served %d writes, %d reads, %d B, refused %d, dropped %d",
			gs.ID, l.Ops, l.OpErrors, l.BytesOut, l.WritesIn, l.ReadsIn, l.BytesIn, l.RefusedIn, l.DroppedIn)
		if gs.FatalCode != 0 || l.Ops == 0 || l.DroppedIn != 0 || gs.Contexts != 0 || gs.Allocs != 0 {
			t.Errorf("gpu %d: %+v, link %+v", gs.ID, gs, *l)
		}
	}
}

// sockPath is the ivshmem socket of GPU id in dir.
func sockPath(dir string, id int) string { return filepath.Join(dir, fmt.Sprintf("g%d.sock", id)) }

// tableRow matches the rows of the p2p matrices and of the all-reduce
// table.
var tableRow = regexp.MustCompile(`^\s+\d+(\s+(\d+(\.\d+)?|-|float|bf16|sum))+\s*$`)

// lineAfter returns the console line after the one holding marker.
func lineAfter(con, marker string) string {
	_, rest, ok := strings.Cut(con, marker)
	if !ok {
		return ""
	}
	lines := strings.SplitN(strings.TrimLeft(rest, "\r\n"), "\n", 2)
	return strings.TrimSpace(lines[0])
}
