package rack

import (
	"context"
	"fmt"
	"time"

	"github.com/PacketFive/hinic/internal/fabric/ibsw"
	"github.com/PacketFive/hinic/internal/ibsm"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// Link layers of a rack.
const (
	LinkEthernet = "eth" // RoCEv2 (the default)
	LinkIB       = "ib"  // native InfiniBand: LIDs from the rack's subnet manager
)

// IBAllHosts is the multicast group every host of an InfiniBand rack is a
// member of (its MGID), and IBAllHostsLID the MLID the rack's subnet
// manager programs for it into the switch's MFT after bring-up, as an SA
// would on each port's join.
var IBAllHosts = [16]byte{0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 15: 0x01}

// IBAllHostsLID is the MLID of IBAllHosts.
const IBAllHostsLID = 0xC001

// IB reports whether the host's port is InfiniBand.
func (h *Host) IB() bool {
	return h.Device != nil && h.Device.QueryPort().LinkLayer == rdma.LinkLayerInfiniBand
}

// LID returns the host's LID (0 on Ethernet, or before the SM ran).
func (h *Host) LID() uint16 {
	if h.Device == nil {
		return 0
	}
	return h.Device.QueryPort().LID
}

// av returns the address vector of peer as h reaches it: a LID on
// InfiniBand, the RoCEv2 GID (with the lossless traffic class) on Ethernet.
func (h *Host) av(peer *Host) (rdma.AHAttr, error) {
	if h.IB() {
		lid := peer.LID()
		if lid == 0 {
			return rdma.AHAttr{}, fmt.Errorf("rack: %s has no LID (is the subnet up?)", peer.Name)
		}
		return rdma.AHAttr{DLID: lid, PortNum: 1}, nil
	}
	gid, err := peer.Device.QueryGID(GIDIndex)
	if err != nil {
		return rdma.AHAttr{}, fmt.Errorf("rack: %s: GID %d: %w", peer.Name, GIDIndex, err)
	}
	return rdma.AHAttr{IsGlobal: true, PortNum: 1, DMAC: peer.MAC, GRH: rdma.GlobalRoute{
		DGID: gid, SGIDIndex: GIDIndex, HopLimit: 64, TrafficClass: RoCETrafficClass}}, nil
}

// madPort is ibsm.Port over a host's QP0 and QP1: the subnet manager of an
// IB rack runs on host1 the way OpenSM runs over umad.
type madPort struct {
	h        *Host
	pd       *rdma.PD
	mr       *rdma.MR
	buf      uint64
	size     uint64
	cq       *rdma.CQ
	qp0, qp1 *rdma.QP
	ahs      map[uint16]*rdma.AH
	timeout  time.Duration
	ctx      context.Context
}

const (
	madSlots    = 16 // receive buffers per special QP
	madSlotSize = rdma.GRHSize + proto.MADSize
)

func newMADPort(ctx context.Context, h *Host) (*madPort, error) {
	d := h.Device
	p := &madPort{h: h, ahs: map[uint16]*rdma.AH{}, timeout: 2 * time.Second, ctx: ctx}
	var err error
	size := uint64(proto.MADSize + 2*madSlots*madSlotSize)
	if p.buf, err = h.Alloc(size); err != nil {
		return nil, err
	}
	p.size = size
	fail := func(what string, err error) (*madPort, error) {
		p.close()
		return nil, fmt.Errorf("rack: %s: %s: %w", h.Name, what, err)
	}
	if p.pd, err = d.AllocPD(); err != nil {
		return fail("alloc PD", err)
	}
	if p.mr, err = d.RegMR(p.pd, p.buf, size, rdma.AccessLocalWrite); err != nil {
		return fail("register MR", err)
	}
	if p.cq, err = d.CreateCQ(4*madSlots, nil); err != nil {
		return fail("create CQ", err)
	}
	for i, t := range []rdma.QPType{rdma.QPTypeSMI, rdma.QPTypeGSI} {
		qp, err := d.CreateQP(p.pd, rdma.QPInitAttr{SendCQ: p.cq, RecvCQ: p.cq, QPType: t,
			Cap: rdma.QPCap{MaxSendWR: 4, MaxRecvWR: madSlots, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return fail("create "+t.String()+" QP", err)
		}
		qkey := uint32(0)
		if t == rdma.QPTypeGSI {
			qkey = 0x80010000
			p.qp1 = qp
		} else {
			p.qp0 = qp
		}
		for _, s := range []struct {
			a    rdma.QPAttr
			mask rdma.QPAttrMask
		}{
			{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: qkey}, rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
			{rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState},
			{rdma.QPAttr{QPState: rdma.QPStateRTS}, rdma.QPAttrState | rdma.QPAttrSQPSN},
		} {
			if err := qp.Modify(&s.a, s.mask); err != nil {
				return fail("modify "+t.String()+" QP", err)
			}
		}
		for k := range madSlots {
			if err := p.postRecv(qp, i*madSlots+k); err != nil {
				return fail("post receive", err)
			}
		}
	}
	return p, nil
}

func (p *madPort) slotAddr(slot int) uint64 {
	return p.buf + proto.MADSize + uint64(slot)*madSlotSize
}

func (p *madPort) postRecv(qp *rdma.QP, slot int) error {
	return qp.PostRecv([]rdma.RecvWR{{WRID: uint64(slot), SGList: []rdma.SGE{
		{Addr: p.slotAddr(slot), Length: madSlotSize, LKey: p.mr.LKey}}}})
}

func (p *madPort) SMP(dlid uint16, mad []byte) ([]byte, error) { return p.exchange(p.qp0, dlid, mad) }
func (p *madPort) GMP(dlid uint16, mad []byte) ([]byte, error) { return p.exchange(p.qp1, dlid, mad) }

// exchange sends mad from qp to dlid and waits for the answer with its
// TransactionID, resending twice on a timeout as OpenSM does.
func (p *madPort) exchange(qp *rdma.QP, dlid uint16, mad []byte) ([]byte, error) {
	ah := p.ahs[dlid]
	if ah == nil {
		var err error
		if ah, err = p.h.Device.CreateAH(p.pd, rdma.AHAttr{DLID: dlid, PortNum: 1}); err != nil {
			return nil, err
		}
		p.ahs[dlid] = ah
	}
	if err := p.h.Memory.WriteAt(mad, p.buf); err != nil {
		return nil, err
	}
	tid := proto.MAD(mad).TransactionID()
	wr := rdma.SendWR{Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, AH: ah, RemoteQPN: qp.QPN(),
		RemoteQKey: 0x80010000, SGList: []rdma.SGE{{Addr: p.buf, Length: proto.MADSize, LKey: p.mr.LKey}}}
	for try := 0; try < 3; try++ {
		if err := qp.PostSend([]rdma.SendWR{wr}); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(p.timeout)
		for time.Now().Before(deadline) {
			var wc [4]rdma.WC
			n := p.cq.Poll(wc[:])
			if n == 0 {
				select {
				case <-p.ctx.Done():
					return nil, p.ctx.Err()
				case <-time.After(20 * time.Microsecond):
				}
				continue
			}
			for _, c := range wc[:n] {
				if c.Opcode != rdma.WCRecv {
					if c.Status != rdma.WCSuccess {
						return nil, fmt.Errorf("MAD send completed with %v", c.Status)
					}
					continue
				}
				slot := int(c.WRID)
				owner := p.qp0
				if slot >= madSlots {
					owner = p.qp1
				}
				var got []byte
				if c.Status == rdma.WCSuccess && c.ByteLen == madSlotSize {
					got = make([]byte, proto.MADSize)
					if err := p.h.Memory.ReadAt(got, p.slotAddr(slot)+rdma.GRHSize); err != nil {
						return nil, err
					}
				}
				if err := p.postRecv(owner, slot); err != nil {
					return nil, err
				}
				if got != nil && proto.MAD(got).TransactionID() == tid {
					return got, nil
				}
			}
		}
	}
	return nil, ibsm.ErrNoAnswer
}

func (p *madPort) close() {
	ahs := make([]*rdma.AH, 0, len(p.ahs))
	for _, ah := range p.ahs {
		ahs = append(ahs, ah)
	}
	_ = teardown{qps: []*rdma.QP{p.qp0, p.qp1}, ahs: ahs, mr: p.mr, cqs: []*rdma.CQ{p.cq}, pd: p.pd}.run(p.h, &p.buf, &p.size)
}

// bringUpIB runs the subnet manager on host h (QP0/QP1) and checks that
// every host's port is Active with a LID. The SM's port stays open until
// Close, so r.SM can query the subnet (LID-routed SMPs, PerfMgt).
func (r *Rack) bringUpIB(ctx context.Context, h *Host) error {
	if err := r.waitIBLinks(ctx); err != nil {
		return err
	}
	port, err := newMADPort(ctx, h)
	if err != nil {
		return err
	}
	r.madPort = port
	sm := ibsm.New(port)
	if err := sm.Bringup(); err != nil {
		return fmt.Errorf("rack: subnet manager on %s: %w", h.Name, err)
	}
	r.SM = sm
	var members []*ibsm.SMNode
	for _, x := range r.Hosts {
		if pa := x.Device.QueryPort(); pa.State != rdma.PortActive || pa.LID == 0 {
			return fmt.Errorf("rack: %s: port %v with LID %d after the subnet manager's sweep", x.Name, pa.State, pa.LID)
		}
		n := sm.NodeByPortGUID(x.Device.QueryDevice().NodeGUID + 1)
		if n == nil {
			return fmt.Errorf("rack: the subnet manager did not find %s", x.Name)
		}
		members = append(members, n)
	}
	if err := sm.Multicast(IBAllHostsLID, members); err != nil {
		return fmt.Errorf("rack: multicast group of all hosts: %w", err)
	}
	for _, x := range r.Hosts {
		x.mcastLIDs = map[[16]byte]uint16{IBAllHosts: IBAllHostsLID}
	}
	return nil
}

// ibLinkWait bounds the wait for the switch to see every host's link.
const ibLinkWait = 5 * time.Second

// waitIBLinks waits until the switch reports every host's port out of
// Down. A host's dial returns when the switch has answered its hello,
// a moment before the switch brings the port's link up; an SM that swept
// in that moment would read the port Down and never find the host.
func (r *Rack) waitIBLinks(ctx context.Context) error {
	sw := r.Fabric.Switches()[0]
	deadline := time.Now().Add(ibLinkWait)
	for {
		down := ""
		if st := sw.Status().IB; st != nil {
			up := map[int]bool{}
			for _, p := range st.Ports {
				up[p.Port] = p.State != ibsw.PortStateName(proto.PortStateDown)
			}
			for _, x := range r.Hosts {
				if !up[x.Index+1] {
					down = x.Name
					break
				}
			}
		}
		if down == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rack: %s: the switch's port stayed Down for %v", down, ibLinkWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
