package deploy

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// RestartOptions shape RestartFabric.
type RestartOptions struct {
	// Hinic is the binary that serves the new fabric; "" is this one.
	Hinic string
	// Kill stops the fabric with SIGKILL, as a crash would, instead of
	// SIGTERM.
	Kill     bool
	Progress Progress
}

// RestartFabric stops the rack's `hinic fabric serve` and starts it again
// on the same configuration, leaving the guests and the device backend
// running. What reconnects, and how (docs/deploy.md, "Restarting the
// fabric"): the device backend redials its seqpacket ports and its
// guests see PORT_ERR then PORT_ACTIVE; the new switch dials every rxe
// guest's QEMU stream server. RC traffic resumes through retransmission
// when the outage fits the QPs' retry budget.
func RestartFabric(ctx context.Context, runDir string, o RestartOptions) (*State, error) {
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	if st.Down {
		return st, fmt.Errorf("deploy: the rack in %s is down (deploy rack brings it up)", runDir)
	}
	r := &st.Rack
	if o.Kill && alive(st.FabricPID, fabricProc(r, st.FabricExe)) {
		if proc, err := os.FindProcess(st.FabricPID); err == nil {
			_ = proc.Signal(syscall.SIGKILL)
		}
		for i := 0; i < 100 && alive(st.FabricPID, fabricProc(r, st.FabricExe)); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		p("fabric: killed (pid %d)", st.FabricPID)
	}
	if alive(st.FabricPID, fabricProc(r, st.FabricExe)) {
		if err := stop(st.FabricPID, fabricProc(r, st.FabricExe), "fabric", p); err != nil {
			return st, err
		}
	}
	st.FabricPID, st.FabricExe = 0, ""
	if err := startFabric(ctx, st, o.Hinic, p); err != nil {
		return st, err
	}
	return st, st.save()
}
