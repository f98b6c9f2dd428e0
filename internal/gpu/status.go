package gpu

import (
	"context"
	"time"

	"github.com/PacketFive/hinic/internal/ctlsock"
)

// Status is what `hinic gpu status` shows: every GPU of a backend.
type Status struct {
	UptimeNS uint64      `json:"uptime_ns"`
	GPUs     []GPUStatus `json:"gpus"`
}

// GPUStatus describes one GPU.
type GPUStatus struct {
	ID        int         `json:"gpu_id"`
	Name      string      `json:"name"`
	Socket    string      `json:"socket"`
	RAMPath   string      `json:"ram_path"`
	MemPath   string      `json:"mem_path,omitempty"` // "" : an anonymous memfd
	MemSize   uint64      `json:"mem_size"`
	MemUsed   uint64      `json:"mem_used"`
	VABase    uint64      `json:"va_base"`
	Guest     bool        `json:"guest_connected"`
	PeerID    int         `json:"peer_id,omitempty"`
	State     string      `json:"state"` // waiting, ready, live, fatal
	FatalCode uint32      `json:"fatal_code,omitempty"`
	Contexts  int         `json:"contexts"`
	Allocs    int         `json:"allocs"`
	Inflight  int         `json:"inflight"`
	Util      float64     `json:"utilization"` // busy time / uptime of the backend (streams add up: may pass 1)
	Counters  GPUCounters `json:"counters"`
	// Link is the GPU's HiLink port, when it has one.
	Link *LinkStatus `json:"hilink,omitempty"`
}

// LinkStatus is a GPU's HiLink port and its peer traffic.
type LinkStatus struct {
	Path       string `json:"path"`        // the switch port's socket
	SwitchPort int    `json:"switch_port"` // its number
	Up         bool   `json:"up"`
	// Relinks counts the sessions with the switch after the first: the
	// link dials again when its switch restarts.
	Relinks uint64 `json:"relinks"`
	// This GPU's peer operations: run, failed, bytes moved each way.
	Ops      uint64 `json:"ops"`
	OpErrors uint64 `json:"op_errors"`
	BytesOut uint64 `json:"bytes_out"` // this GPU's operations
	// MaxInflight is the most peer operations of the guest seen in
	// flight at once (its budget bounds it).
	MaxInflight uint64 `json:"max_inflight"`
	// Requests of other GPUs: write frames, read requests, refused
	// (no access, bad address, no guest), bytes served, frames dropped.
	WritesIn  uint64 `json:"writes_in"`
	ReadsIn   uint64 `json:"reads_in"`
	RefusedIn uint64 `json:"refused_in"`
	BytesIn   uint64 `json:"bytes_in"`
	DroppedIn uint64 `json:"dropped_in"`
}

// GPUCounters are the backend's counters of a GPU since it started.
type GPUCounters struct {
	Sessions   uint64 `json:"sessions"`
	Rejected   uint64 `json:"rejected_connections"`
	Doorbells  uint64 `json:"doorbells"`
	Interrupts uint64 `json:"interrupts"`
	Commands   uint64 `json:"commands"`
	Errors     uint64 `json:"errors"`
	Kernels    uint64 `json:"kernels"`
	BytesH2D   uint64 `json:"bytes_h2d"`
	BytesD2H   uint64 `json:"bytes_d2h"`
	BytesD2D   uint64 `json:"bytes_d2d"`
	BusyNS     uint64 `json:"busy_ns"`
	Fatal      uint64 `json:"fatal"`
	Resets     uint64 `json:"resets"`
	// Dropped counts completions not written: the device was reset or
	// went fatal while the command was in flight.
	Dropped uint64 `json:"dropped_completions"`
}

// Status returns the state and counters of the GPU; uptime is the
// backend's, for the utilisation.
func (g *GPU) Status(uptime time.Duration) GPUStatus {
	c := g.cfg
	x := &g.stats
	st := GPUStatus{ID: c.ID, Name: c.Name, Socket: c.Socket, RAMPath: c.RAMPath, MemPath: c.MemPath,
		MemSize: c.MemSize, VABase: VABase(c.ID), State: ctlsock.StateWaiting}
	st.Counters = GPUCounters{Sessions: x.sessions.Load(), Rejected: x.rejected.Load(), Doorbells: x.doorbells.Load(),
		Interrupts: x.interrupts.Load(), Commands: x.commands.Load(), Errors: x.errors.Load(), Kernels: x.kernels.Load(),
		BytesH2D: x.bytesH2D.Load(), BytesD2H: x.bytesD2H.Load(), BytesD2D: x.bytesD2D.Load(), BusyNS: x.busyNS.Load(),
		Fatal: x.fatal.Load(), Resets: x.resets.Load(), Dropped: x.canceled.Load()}
	if uptime > 0 {
		st.Util = float64(st.Counters.BusyNS) / float64(uptime.Nanoseconds())
	}
	if l := g.link; l != nil {
		x := &l.stats
		ep := l.ep.Load()
		st.Link = &LinkStatus{Path: c.HiLink, SwitchPort: ep.Port(), Up: ep.Err() == nil, Relinks: x.relinks.Load(),
			Ops: x.opsOut.Load(), OpErrors: x.errorsOut.Load(), BytesOut: x.bytesOut.Load(),
			MaxInflight: x.maxInflight.Load(), WritesIn: x.writesIn.Load(), ReadsIn: x.readsIn.Load(),
			RefusedIn: x.refusedIn.Load(), BytesIn: x.bytesIn.Load(), DroppedIn: x.droppedIn.Load()}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sess
	if s == nil {
		return st
	}
	st.Guest, st.PeerID = true, s.peerID
	st.State, st.FatalCode = ctlsock.GuestState(&s.hdr.DevStatus, &s.hdr.FatalCode, DevLive, DevFatal)
	s.memMu.RLock()
	st.MemUsed, st.Allocs = s.heap.used, s.nalloc
	s.memMu.RUnlock()
	s.mu.Lock()
	st.Contexts, st.Inflight = len(s.ctxs), s.inflight
	s.mu.Unlock()
	return st
}

// Status returns the status of every GPU.
func (s *Server) Status() Status {
	up := time.Since(s.started)
	st := Status{UptimeNS: uint64(up.Nanoseconds()), GPUs: []GPUStatus{}}
	for _, g := range s.gpus {
		st.GPUs = append(st.GPUs, g.Status(up))
	}
	return st
}

// QueryStatus reads a backend's status from its control socket.
func QueryStatus(ctx context.Context, path string) (Status, error) {
	return ctlsock.Query[Status](ctx, path, "gpu", "hinic gpu serve")
}
