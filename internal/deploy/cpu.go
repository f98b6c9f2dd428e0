package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/PID/stat's utime and stime: USER_HZ, 100
// on every Linux architecture HiNIC runs on (it is fixed by the ABI,
// whatever the kernel's own HZ).
const userHZ = 100

// CPUSeconds returns the CPU time, user plus system, that each running
// process of the rack has used since it started: "fabric", "backend"
// (hinic device serve, with HiNIC guests; with the fabric inside it, no
// "fabric"), "gpu" (hinic gpu serve, with
// guests that have GPUs) and "qemu:<guest>". A process that is not
// running, or whose pid now belongs to another program, is left out.
// verify e2e --rack reads it before and after each case.
func (st *State) CPUSeconds() map[string]float64 {
	r := &st.Rack
	out := map[string]float64{}
	if len(st.Hosts) > 0 {
		// A rack across hosts: each host's part, asked at once (an
		// ssh host's is a round trip), its daemons as "backend@HOST";
		// guest names are the rack's own.
		parts := make([]map[string]float64, len(st.Hosts))
		_ = forEach(len(st.Hosts), func(i int) error {
			parts[i] = st.Hosts[i].partCPU()
			return nil
		})
		for i, h := range st.Hosts {
			for k, v := range parts[i] {
				if !strings.HasPrefix(k, "qemu:") {
					k += "@" + h.Name
				}
				out[k] = v
			}
		}
		return out
	}
	add := func(name string, pid int, p proc) {
		if !alive(pid, p) {
			return
		}
		if s, err := procCPU(pid); err == nil {
			out[name] = s
		}
	}
	if !r.joined() {
		// Joined, the fabric's CPU is the backend's.
		add("fabric", st.FabricPID, fabricProc(r, st.FabricExe))
	}
	if st.DevicePID != 0 {
		add("backend", st.DevicePID, deviceProc(r, st.DeviceExe))
	}
	if st.GPUPID != 0 {
		add("gpu", st.GPUPID, gpuProc(r, st.GPUExe))
	}
	for name, pid := range st.HiLinkPIDs {
		add("hilink:"+name, pid, hilinkProc(r, name, st.HiLinkExe))
	}
	for _, g := range st.Guests {
		g.Dir = GuestDir(r, g.Name)
		add("qemu:"+g.Name, g.PID, guestProc(&g))
	}
	return out
}

// partCPU is CPUSeconds of host h's part: read here for a host of this
// machine, and by that machine's hinic (hinic deploy cpu -o json) for an
// ssh host; nil when the part has no state or cannot be asked within
// 20 s.
func (h HostState) partCPU() map[string]float64 {
	if h.SSH == "" {
		sub, err := ReadState(h.RunDir)
		if err != nil {
			return nil
		}
		return sub.CPUSeconds()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Host.sshRun(ctx, nil, nil, shellJoin(h.hinic(), "deploy", "cpu", "--run-dir", h.RunDir, "-o", "json"))
	if err != nil {
		return nil
	}
	var m map[string]float64
	if json.Unmarshal(out, &m) != nil {
		return nil
	}
	return m
}

// procCPU reads a process's utime and stime from /proc/PID/stat.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime+stime, in seconds, of a /proc/PID/stat
// line. The command name, in parentheses, may hold spaces and ')', so
// the fields are counted from the last ')': state is field 3, utime 14
// and stime 15.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += v
	}
	return float64(ticks) / userHZ, nil
}
