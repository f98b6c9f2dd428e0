package deploy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/gpu"
)

// GuestStatus is one guest line of Status.
type GuestStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"` // running, stopped, crashed, unreachable; unknown when libvirt does not say
	PID       int    `json:"pid"`
	SSH       string `json:"ssh"`
	DataIP    string `json:"data_ip"`
	NIC       string `json:"nic"`
	RDMADev   string `json:"rdma_dev"`
	Link      string `json:"link"`  // eth or ib
	Accel     string `json:"accel"` // tcg or kvm
	PortState string `json:"port_state"`
	LID       string `json:"lid,omitempty"` // an InfiniBand port's LID, e.g. 0x3`
	// Domain is the guest's libvirt domain, if it was placed through
	// libvirt; State is then the domain's.
	Domain string `json:"domain,omitempty"`
	Error  string `json:"error,omitempty"`
}

// RackStatus is what `hinic deploy status` shows.
type RackStatus struct {
	Name   string `json:"name"`
	RunDir string `json:"run_dir"`
	Down   bool   `json:"down"`
	Fabric string `json:"fabric"` // running or stopped
	// Device is the device backend's state (running or stopped) in a
	// rack with hicain guests, else empty; VNICs is its status.
	Device string              `json:"device,omitempty"`
	VNICs  []device.VNICStatus `json:"vnics,omitempty"`
	// GPU is the GPU backend's state (running or stopped) in a rack
	// with GPUs, else empty; GPUs are every guest's GPUs with the
	// backend's view of each.
	GPU  string    `json:"gpu,omitempty"`
	GPUs []GPUInfo `json:"gpus,omitempty"`
	// HiLink are the racks' HiLink switches that GPUs cable to.
	HiLink   []HiLinkInfo   `json:"hilink,omitempty"`
	Guests   []GuestStatus  `json:"guests"`
	Switches *fabric.Status `json:"switches,omitempty"`
	// Hosts are the statuses of the hosts' parts of a rack that spans
	// hosts; the fields above then join them: a daemon is running when
	// it runs on every host, and the lists hold every host's entries.
	Hosts []HostStatus `json:"hosts,omitempty"`
}

// HostStatus is one host's part of a rack that spans hosts: the host
// (name, address, run directory) and its part's status. The part is a
// named field: embedded, its name and run_dir would collide with the
// host's, and encoding/json drops both.
type HostStatus struct {
	HostState
	Part *RackStatus `json:"status"`
}

// Status looks at each process of the rack, asks each running guest for
// its RDMA port state over SSH, and queries the fabric and the device
// and GPU backends.
func Status(ctx context.Context, runDir string) (*RackStatus, error) {
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	if len(st.Hosts) > 0 {
		return hostsStatus(ctx, st)
	}
	rs := &RackStatus{Name: st.Rack.Name, RunDir: st.Rack.RunDir, Down: st.Down, Fabric: "stopped"}
	if alive(st.FabricPID, fabricProc(&st.Rack, st.FabricExe)) {
		rs.Fabric = "running"
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs.Switches, _ = fabric.QueryStatus(qctx, filepath.Join(st.Rack.RunDir, DirFabric))
		cancel()
	}
	if len(st.Rack.hicainGuests()) > 0 {
		rs.Device = "stopped"
		if alive(st.DevicePID, deviceProc(&st.Rack, st.DeviceExe)) {
			rs.Device = "running"
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if ds, err := device.QueryStatus(qctx, DeviceControl(&st.Rack)); err == nil {
				rs.VNICs = ds.VNICs
			}
			cancel()
		}
	}
	if len(st.Rack.gpuGuests()) > 0 {
		rs.GPU = "stopped"
		var gst *gpu.Status
		if alive(st.GPUPID, gpuProc(&st.Rack, st.GPUExe)) {
			rs.GPU = "running"
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if s, err := gpu.QueryStatus(qctx, GPUControl(&st.Rack)); err == nil {
				gst = &s
			}
			cancel()
		}
		rs.GPUs = gpuInfos(&st.Rack, gst, rs.GPU)
		rs.HiLink = HiLinkInfos(ctx, st)
	}
	rs.Guests = make([]GuestStatus, len(st.Guests))
	var wg sync.WaitGroup
	for i := range st.Guests {
		g := &st.Guests[i]
		gs := &rs.Guests[i]
		*gs = GuestStatus{Name: g.Name, PID: g.PID, SSH: g.SSHAddr, DataIP: g.DataIP, NIC: g.NIC, RDMADev: g.RDMADev, Link: g.Link,
			Accel: g.Accel, State: "stopped"}
		if g.Domain != "" {
			gs.Domain = g.Domain
			dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			ds, err := virsh{uri: g.Libvirt}.claim(dctx, g.Domain, st.Rack.RunDir, g.Name)
			cancel()
			switch {
			case err != nil:
				gs.State, gs.Error = "unknown", err.Error()
				continue
			case ds != "running":
				if !st.Down {
					gs.State, gs.Error = "crashed", fmt.Sprintf("libvirt domain %s: %s", g.Domain, cmp.Or(ds, "not defined"))
				}
				continue
			}
		} else if !alive(g.PID, qemuProc(g.Dir)) {
			if !st.Down {
				gs.State = "crashed"
				if b, err := os.ReadFile(filepath.Join(g.Dir, "qemu.log")); err == nil {
					gs.Error = lastLines(string(b), 1)
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			c, err := st.Connect(cctx, g)
			if err != nil {
				gs.State, gs.Error = "unreachable", err.Error()
				return
			}
			defer c.Close()
			gs.State = "running"
			if g.RDMADev != "" {
				port := "/sys/class/infiniband/" + g.RDMADev + "/ports/1/"
				out, err := c.Run(cctx, "cat "+port+"state")
				if err != nil {
					gs.PortState = "absent"
				} else {
					f := strings.Fields(out)
					gs.PortState = f[len(f)-1]
				}
				if g.Link == LinkIB {
					if out, err := c.Run(cctx, "cat "+port+"lid"); err == nil {
						gs.LID = strings.TrimSpace(out)
					}
				}
			}
		}()
	}
	wg.Wait()
	return rs, nil
}

// WriteLog copies a guest file's tail (e.g. its console) to w.
func WriteLog(w io.Writer, path string, lines int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, lastLines(string(b), lines)+"\n")
	return err
}

// hostsStatus is the status of a rack that spans hosts: each host's, and
// the join of them.
func hostsStatus(ctx context.Context, st *State) (*RackStatus, error) {
	rs := &RackStatus{Name: st.Rack.Name, RunDir: st.Rack.RunDir, Down: st.Down}
	hs := make([]*RackStatus, len(st.Hosts))
	errs := make([]error, len(st.Hosts))
	_ = forEach(len(st.Hosts), func(i int) error {
		hs[i], errs[i] = st.Hosts[i].partStatus(ctx)
		return nil
	})
	both := func(a, b string) string {
		if a == "" || a == "running" {
			return b
		}
		return a
	}
	guests := map[string]GuestStatus{}
	hostErr := map[string]string{}
	for i, h := range st.Hosts {
		if errs[i] != nil {
			// A host whose part never started has no state; one over
			// SSH may not answer.
			hs[i] = &RackStatus{Name: h.Name, RunDir: h.RunDir, Down: true, Fabric: "stopped"}
			if h.SSH != "" {
				hostErr[h.Name] = errs[i].Error()
			}
		}
		x := hs[i]
		rs.Hosts = append(rs.Hosts, HostStatus{HostState: h, Part: x})
		rs.Fabric = both(rs.Fabric, x.Fabric)
		if x.Device != "" {
			rs.Device = both(rs.Device, x.Device)
		}
		if x.GPU != "" {
			rs.GPU = both(rs.GPU, x.GPU)
		}
		rs.VNICs = append(rs.VNICs, x.VNICs...)
		rs.GPUs = append(rs.GPUs, x.GPUs...)
		if x.Switches != nil {
			if rs.Switches == nil {
				rs.Switches = &fabric.Status{RunDir: st.Rack.RunDir}
			}
			rs.Switches.Switches = append(rs.Switches.Switches, x.Switches.Switches...)
		}
		for _, g := range x.Guests {
			guests[g.Name] = g
		}
	}
	for _, g := range st.Guests {
		gs, ok := guests[g.Name]
		if !ok {
			gs = GuestStatus{Name: g.Name, State: "stopped", SSH: g.SSHAddr, DataIP: g.DataIP, NIC: g.NIC, Link: g.Link}
			if rg := st.Rack.guestsWhere(func(x Guest) bool { return x.Name == g.Name }); len(rg) == 1 && hostErr[rg[0].Host] != "" {
				gs.State, gs.Error = "unknown", hostErr[rg[0].Host]
			}
		}
		rs.Guests = append(rs.Guests, gs)
	}
	return rs, nil
}
