package live

import (
	"context"
	"path/filepath"
	"time"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
)

// queryTimeout bounds one read of a control socket.
const queryTimeout = 2 * time.Second

// RunDir reads a deployed rack's counters: the fabric's ports through
// its control socket and, with hicain guests, the device backend's
// vNICs through its own (the queries of hinic fabric status and hinic
// device status). A backend that does not answer contributes nothing;
// only a fabric that does not answer is an error.
type RunDir struct {
	Rack *deploy.Rack
}

// Sample reads the counters once.
func (s RunDir) Sample(ctx context.Context) (Sample, error) {
	var smp Sample
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	fs, err := fabric.QueryStatus(qctx, filepath.Join(s.Rack.RunDir, deploy.DirFabric))
	cancel()
	if err != nil {
		return smp, err
	}
	smp.Ports = FabricPorts(fs)
	qctx, cancel = context.WithTimeout(ctx, queryTimeout)
	ds, err := device.QueryStatus(qctx, deploy.DeviceControl(s.Rack))
	cancel()
	if err == nil {
		smp.Guests = DeviceGuests(&ds)
	}
	return smp, nil
}

// FabricPorts takes the ports of a fabric's status.
func FabricPorts(fs *fabric.Status) []PortSample {
	var out []PortSample
	for _, sw := range fs.Switches {
		for _, p := range sw.Ports {
			out = append(out, PortSample{Switch: sw.Name, Port: p.Num, Up: p.State == "up",
				RxFrames: p.RxFrames, TxFrames: p.TxFrames, RxBytes: p.RxBytes, TxBytes: p.TxBytes})
		}
	}
	return out
}

// DeviceGuests takes the vNICs of a device backend's status.
func DeviceGuests(ds *device.Status) []GuestSample {
	var out []GuestSample
	for _, v := range ds.VNICs {
		g := GuestSample{Name: guestOfVNIC(v.Name), State: v.State, LinkUp: v.LinkUp, QPs: []QP{},
			Doorbells: v.Counters.Doorbells, Interrupts: v.Counters.Interrupts,
			L2Tx: v.Counters.L2Tx, L2Rx: v.Counters.L2Rx, RoCERx: v.Counters.RoCERx}
		for _, q := range v.QPs {
			g.QPs = append(g.QPs, QP{QPN: q.QPN, State: q.State, SQ: q.SQCons, RQ: q.RQCons})
		}
		out = append(out, g)
	}
	return out
}
