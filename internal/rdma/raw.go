package rdma

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"
)

// Raw packet QPs (IBV_QPT_RAW_PACKET) and flow steering (ibv_create_flow).
//
// A raw packet QP sends whole Ethernet frames: each send WR's data is
// one frame, from its destination MAC to the end of its payload (no FCS),
// sent as it is. Its receive WRs take whole frames too, placed at the
// start of the WR's buffers with byte_len the frame's length. A raw QP
// gets only the frames its flows select: a flow (CreateFlow) is a match on
// the frame's Ethernet, IPv4 or IPv6 and TCP or UDP headers, each field
// under a mask, as the ibv_flow_spec_* of libibverbs describe them.
//
// Steering, as a NIC's embedded switch does it:
//   - A frame a raw QP sends that a flow of this device matches goes to
//     that flow's QP through the loopback queue and not to the port;
//     anything else goes to the port (through DeviceConfig.RawTxFilter).
//   - A frame from the port that is not the transport's (the device
//     backend decides; RoCEv2 frames never reach the flows) and that a
//     flow matches goes to the flow's QP (DeliverRaw) instead of the
//     host's netdev.
//
// When several flows match, the one with the lowest Priority wins, then
// the oldest. The table is copy-on-write: changed whole under Device.mu
// and read lock-free (an atomic pointer), so the fabric receive goroutine
// can steer without the engine.

// MaxRawFrame is the longest frame a raw QP sends or receives (bytes,
// without FCS): the engine's frame buffer, a 4096-byte MTU's frame with
// room for tags. The shortest is an Ethernet header, EthHeaderLen.
const MaxRawFrame = maxFrameSize

// EthHeaderLen is an untagged Ethernet header: destination and source
// MAC and EtherType.
const EthHeaderLen = 14

// rawTransitions are ib_modify_qp_is_ok's for IB_QPT_RAW_PACKET: only
// the port is an attribute (RESET->INIT), since a raw QP has no
// transport state.
var rawTransitions = func() (t transitions) {
	t = baseTransitions()
	ok := transition{valid: true}
	t[QPStateReset][QPStateInit] = transition{valid: true, req: QPAttrPort}
	t[QPStateInit][QPStateInit] = transition{valid: true, opt: QPAttrPort}
	t[QPStateInit][QPStateRTR] = ok
	t[QPStateRTR][QPStateRTS] = ok
	t[QPStateRTS][QPStateRTS] = ok
	return t
}()

// checkRawSendWR checks a raw QP's send WR at post: a SEND of one frame,
// EthHeaderLen to MaxRawFrame bytes (checkSendWR has checked the
// opcode and the SGE count).
func (qp *QP) checkRawSendWR(wr *SendWR, length uint64) error {
	if length < EthHeaderLen || length > MaxRawFrame {
		return fmt.Errorf("frame of %d bytes on raw packet QP %#x, outside %d..%d: %w", length, qp.qpn,
			EthHeaderLen, MaxRawFrame, ErrInvalid)
	}
	if wr.SendFlags&SendInline != 0 && length > uint64(qp.init.Cap.MaxInlineData) {
		return fmt.Errorf("%d bytes of inline data, QP %#x allows %d: %w", length, qp.qpn, qp.init.Cap.MaxInlineData, ErrInvalid)
	}
	return nil
}

// rawSend gathers one frame and sends it: to a raw QP of this device
// when a flow matches it, else to the port. It returns the completion
// status.
func (qp *QP) rawSend(w *sendWQE) WCStatus {
	d := qp.dev
	e := &d.eng
	if !qp.resolveSend(w, 0) {
		return WCLocProtErr
	}
	frame := e.tx.b[:w.length]
	if !qp.gather(w, 0, frame) {
		return WCLocProtErr
	}
	d.ctr.rawSent.Add(1)
	if d.flows.Load().match(frame) != nil {
		if len(e.loopQ)-e.loopHead >= maxLoopQueue {
			d.ctr.rxDropped.Add(1)
			return WCSuccess
		}
		lb := e.getBuf()
		lb.n, lb.raw = copy(lb.b[:], frame), true
		e.loopQ = append(e.loopQ, lb)
		d.ctr.loopback.Add(1)
		return WCSuccess
	}
	if f := d.cfg.RawTxFilter; f != nil && !f(frame) {
		d.ctr.rawTxFiltered.Add(1)
		return WCSuccess // dropped as a switch's source check drops it
	}
	if err := d.port.Send(frame); err != nil {
		d.ctr.txErrors.Add(1)
	}
	d.ctr.txPackets.Add(1)
	d.ctr.txBytes.Add(uint64(len(frame)))
	return WCSuccess
}

// rxRaw hands a frame DeliverRaw or a raw QP's send steered to the raw
// QP of the flow that matches it now (engine).
func (e *engine) rxRaw(frame []byte) {
	d := e.d
	t := d.flows.Load()
	f, k := t.matchKey(frame)
	if f == nil || f.qp.destroyed {
		d.ctr.rawNoFlow.Add(1)
		return
	}
	qp := f.qp
	if r := qp.rss.Load(); r != nil {
		if qp = r.pick(&k); qp.destroyed {
			d.ctr.rawNoFlow.Add(1)
			return
		}
	}
	qp.rawDeliver(frame)
}

// rawDeliver completes the next receive WR with frame (engine).
func (qp *QP) rawDeliver(frame []byte) {
	d := qp.dev
	if st := qp.State(); st != QPStateRTR && st != QPStateRTS {
		d.ctr.rxWrongState.Add(1)
		return
	}
	w := qp.recvTake()
	if w == nil {
		d.ctr.rawNoRecv.Add(1) // no buffer: the frame is lost, as on the wire
		return
	}
	wc := WC{WRID: w.wrID, Opcode: WCRecv, QPNum: qp.qpn, SrcQP: qp.qpn, ByteLen: uint32(len(frame))}
	fatal := qp.placeDatagram(w, &wc, nil, 0, frame, &d.ctr.rawTooLong)
	qp.completeRecv(&wc, &d.ctr.rawReceived, false, fatal)
}

// DeliverRaw steers a frame from the port that is not for the transport:
// when a flow matches it, it is copied and queued for the flow's raw QP
// as Deliver queues a frame, and DeliverRaw returns true; otherwise it
// returns false and the caller keeps the frame (for the host's netdev).
// Safe for concurrent use.
func (d *Device) DeliverRaw(frame []byte) bool {
	if !d.Steers(frame) {
		return false
	}
	d.deliver(frame, true)
	return true
}

// Steers reports whether a flow matches frame now, so that DeliverRaw
// would take it. Safe for concurrent use; it does not allocate.
func (d *Device) Steers(frame []byte) bool { return d.flows.Load().match(frame) != nil }

// FlowEth matches the Ethernet header (ibv_flow_spec_eth). VLANTag is
// the 802.1Q tag's TCI; a frame without a tag has none, which only a
// zero VLANMask matches. EtherType is the type after the tag.
type FlowEth struct {
	DstMAC, DstMACMask, SrcMAC, SrcMACMask [6]byte
	EtherType, EtherTypeMask               uint16
	VLANTag, VLANMask                      uint16
}

// FlowIPv4 matches an IPv4 header (ibv_flow_spec_ipv4_ext's addresses
// and protocol).
type FlowIPv4 struct {
	Src, SrcMask, Dst, DstMask [4]byte
	Proto, ProtoMask           uint8
}

// FlowIPv6 matches an IPv6 header (ibv_flow_spec_ipv6's addresses and
// next header).
type FlowIPv6 struct {
	Src, SrcMask, Dst, DstMask [16]byte
	NextHdr, NextHdrMask       uint8
}

// FlowL4 matches a TCP or UDP header's ports (ibv_flow_spec_tcp_udp);
// Proto is ProtoTCP or ProtoUDP, which the frame's must be.
type FlowL4 struct {
	Proto                uint8
	SrcPort, SrcPortMask uint16
	DstPort, DstPortMask uint16
}

// IP protocol numbers of FlowL4.Proto.
const (
	ProtoTCP = 6
	ProtoUDP = 17
)

// FlowSpec is what a flow matches: every header it names, each field
// under its mask. A nil header matches any frame; IPv4 and IPv6 exclude
// each other, and an L4 match needs neither (it then matches over
// either family).
type FlowSpec struct {
	Priority uint16 // lower wins
	Eth      *FlowEth
	IPv4     *FlowIPv4
	IPv6     *FlowIPv6
	L4       *FlowL4
}

// Flow steers the frames its spec matches to its raw packet QP.
// Destroy is safe for concurrent use.
type Flow struct {
	qp   *QP
	spec FlowSpec
	id   uint64
}

// flowTable is an immutable set of flows in match order.
type flowTable struct {
	flows []*Flow
}

// CreateFlow adds a flow that steers the frames spec matches to qp, a
// raw packet QP (ibv_create_flow).
func (qp *QP) CreateFlow(spec FlowSpec) (*Flow, error) {
	d := qp.dev
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if qp.init.QPType != QPTypeRawPacket {
		return nil, fmt.Errorf("rdma: create flow on %v QP %#x: only raw packet QPs take flows: %w",
			qp.init.QPType, qp.qpn, ErrUnsupported)
	}
	if spec.IPv4 != nil && spec.IPv6 != nil {
		return nil, fmt.Errorf("rdma: create flow on QP %#x: IPv4 and IPv6 together: %w", qp.qpn, ErrInvalid)
	}
	if spec.L4 != nil && spec.L4.Proto != ProtoTCP && spec.L4.Proto != ProtoUDP {
		return nil, fmt.Errorf("rdma: create flow on QP %#x: L4 protocol %d is not TCP or UDP: %w", qp.qpn,
			spec.L4.Proto, ErrInvalid)
	}
	f := &Flow{qp: qp, spec: cloneSpec(spec)}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.flows.Load()
	n := 0
	if old != nil {
		n = len(old.flows)
	}
	if n >= d.cfg.MaxFlow {
		return nil, fmt.Errorf("rdma: create flow: %d flows exist (MaxFlow): %w", n, ErrNoResources)
	}
	if qp.flowsGone {
		// Destroy took the QP's flows away (dropFlows, under d.mu): a
		// flow added now would outlive the QP.
		return nil, fmt.Errorf("rdma: create flow: QP %#x destroyed: %w", qp.qpn, ErrInvalid)
	}
	d.flowID++
	f.id = d.flowID
	t := &flowTable{flows: make([]*Flow, 0, n+1)}
	if old != nil {
		t.flows = append(t.flows, old.flows...)
	}
	t.flows = append(t.flows, f)
	slices.SortStableFunc(t.flows, func(a, b *Flow) int {
		return cmp.Or(cmp.Compare(a.spec.Priority, b.spec.Priority), cmp.Compare(a.id, b.id))
	})
	d.flows.Store(t)
	return f, nil
}

// Destroy removes the flow (ibv_destroy_flow): frames it matched go
// elsewhere from now on.
func (f *Flow) Destroy() error {
	d := f.qp.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.removeFlows(func(g *Flow) bool { return g == f }) {
		return fmt.Errorf("rdma: destroy flow: already destroyed: %w", ErrInvalid)
	}
	return nil
}

// dropFlows removes the flows of a QP being destroyed (engine).
func (d *Device) dropFlows(qp *QP) {
	if qp.init.QPType != QPTypeRawPacket {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	qp.flowsGone = true
	d.removeFlows(func(g *Flow) bool { return g.qp == qp })
}

// removeFlows replaces the table with one without the flows drop
// selects; it reports whether there were any. d.mu is held.
func (d *Device) removeFlows(drop func(*Flow) bool) bool {
	old := d.flows.Load()
	if old == nil || !slices.ContainsFunc(old.flows, drop) {
		return false
	}
	t := &flowTable{flows: slices.DeleteFunc(slices.Clone(old.flows), drop)}
	d.flows.Store(t)
	return true
}

func cloneSpec(s FlowSpec) FlowSpec {
	c := s
	if s.Eth != nil {
		e := *s.Eth
		c.Eth = &e
	}
	if s.IPv4 != nil {
		v := *s.IPv4
		c.IPv4 = &v
	}
	if s.IPv6 != nil {
		v := *s.IPv6
		c.IPv6 = &v
	}
	if s.L4 != nil {
		v := *s.L4
		c.L4 = &v
	}
	return c
}

// match returns the flow a frame goes to, or nil. It parses the frame's
// headers once, and only when there are flows.
func (t *flowTable) match(frame []byte) *Flow {
	f, _ := t.matchKey(frame)
	return f
}

// matchKey is match that also returns the frame's key.
func (t *flowTable) matchKey(frame []byte) (*Flow, FlowKey) {
	if t == nil || len(t.flows) == 0 {
		return nil, FlowKey{}
	}
	k, ok := ParseFlowKey(frame)
	if !ok {
		return nil, k
	}
	for _, f := range t.flows {
		if f.spec.matches(&k) {
			return f, k
		}
	}
	return nil, k
}

// FlowKey is what flows match in a frame: its headers' fields, taken by
// ParseFlowKey.
type FlowKey struct {
	DstMAC, SrcMAC [6]byte
	EtherType      uint16 // after the tag
	HasVLAN        bool
	VLANTag        uint16 // the 802.1Q TCI
	IPVersion      uint8  // 4, 6, or 0: neither (or a short header)
	Src, Dst       [16]byte
	Proto          uint8 // IPv4 protocol or IPv6 next header
	HasPorts       bool  // a TCP or UDP header with its ports is there
	SrcPort        uint16
	DstPort        uint16
}

// EtherTypes ParseFlowKey looks into.
const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86DD
	etherTypeVLAN = 0x8100
)

// ParseFlowKey takes the fields flows match from an Ethernet frame (a
// guest's or the wire's: untrusted). It reads one 802.1Q tag, an IPv4
// header (its IHL checked against the frame) or an IPv6 fixed header,
// and the ports of a TCP or UDP header right after it; an IPv4 fragment
// past the first has no ports, nor has an IPv6 packet with extension
// headers (its next header is the first extension's). Frames shorter
// than an Ethernet header give ok false; shorter inner headers leave
// the fields they would hold zero. It does not allocate.
func ParseFlowKey(f []byte) (k FlowKey, ok bool) {
	if len(f) < EthHeaderLen {
		return k, false
	}
	k.DstMAC, k.SrcMAC = [6]byte(f[0:6]), [6]byte(f[6:12])
	k.EtherType = be16(f[12:])
	p := f[EthHeaderLen:]
	if k.EtherType == etherTypeVLAN && len(p) >= 4 {
		k.HasVLAN, k.VLANTag, k.EtherType = true, be16(p), be16(p[2:])
		p = p[4:]
	}
	var l4 []byte
	switch k.EtherType {
	case etherTypeIPv4:
		if len(p) < 20 || p[0]>>4 != 4 {
			return k, true
		}
		ihl := int(p[0]&0xf) * 4
		if ihl < 20 || len(p) < ihl {
			return k, true
		}
		k.IPVersion, k.Proto = 4, p[9]
		copy(k.Src[:4], p[12:16])
		copy(k.Dst[:4], p[16:20])
		if be16(p[6:])&0x1fff == 0 { // the first (or only) fragment
			l4 = p[ihl:]
		}
	case etherTypeIPv6:
		if len(p) < 40 || p[0]>>4 != 6 {
			return k, true
		}
		k.IPVersion, k.Proto = 6, p[6]
		k.Src, k.Dst = [16]byte(p[8:24]), [16]byte(p[24:40])
		l4 = p[40:]
	}
	if (k.Proto == ProtoTCP || k.Proto == ProtoUDP) && len(l4) >= 4 {
		k.HasPorts, k.SrcPort, k.DstPort = true, be16(l4), be16(l4[2:])
	}
	return k, true
}

func be16(b []byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

func masked6(a, b, m [6]byte) bool {
	for i := range m {
		if (a[i]^b[i])&m[i] != 0 {
			return false
		}
	}
	return true
}

func maskedN(a, b, m []byte) bool {
	for i := range m {
		if (a[i]^b[i])&m[i] != 0 {
			return false
		}
	}
	return true
}

// matches reports whether the frame of k is one s selects.
func (s *FlowSpec) matches(k *FlowKey) bool {
	if e := s.Eth; e != nil {
		if !masked6(k.DstMAC, e.DstMAC, e.DstMACMask) || !masked6(k.SrcMAC, e.SrcMAC, e.SrcMACMask) ||
			(k.EtherType^e.EtherType)&e.EtherTypeMask != 0 {
			return false
		}
		if e.VLANMask != 0 && (!k.HasVLAN || (k.VLANTag^e.VLANTag)&e.VLANMask != 0) {
			return false
		}
	}
	if v := s.IPv4; v != nil {
		if k.IPVersion != 4 || !maskedN(k.Src[:4], v.Src[:], v.SrcMask[:]) ||
			!maskedN(k.Dst[:4], v.Dst[:], v.DstMask[:]) || (k.Proto^v.Proto)&v.ProtoMask != 0 {
			return false
		}
	}
	if v := s.IPv6; v != nil {
		if k.IPVersion != 6 || !maskedN(k.Src[:], v.Src[:], v.SrcMask[:]) ||
			!maskedN(k.Dst[:], v.Dst[:], v.DstMask[:]) || (k.Proto^v.NextHdr)&v.NextHdrMask != 0 {
			return false
		}
	}
	if l := s.L4; l != nil {
		if !k.HasPorts || k.Proto != l.Proto || (k.SrcPort^l.SrcPort)&l.SrcPortMask != 0 ||
			(k.DstPort^l.DstPort)&l.DstPortMask != 0 {
			return false
		}
	}
	return true
}

// FlowMemory is the host memory one flow holds at most: the flow, its
// spec's headers and its slot in the table, for the backend's budget.
func FlowMemory() int64 {
	return int64(unsafe.Sizeof(Flow{}) + unsafe.Sizeof(FlowEth{}) + unsafe.Sizeof(FlowIPv4{}) +
		unsafe.Sizeof(FlowIPv6{}) + unsafe.Sizeof(FlowL4{}) + 8)
}

// Receive-side scaling (IBV_QPT_RAW_PACKET with an indirection table):
// an RSS QP has no queues of its own; the frames its flows take go to
// one of the receive work queues of its table, chosen by the Toeplitz
// hash of the frame's fields (ibv_rx_hash_conf). A work queue (ibv_wq,
// IBV_WQT_RQ) is a raw packet QP with a receive queue and no send
// queue.

// RSS hash fields (enum ibv_rx_hash_fields).
const (
	RxHashSrcIPv4    = 1 << 0
	RxHashDstIPv4    = 1 << 1
	RxHashSrcIPv6    = 1 << 2
	RxHashDstIPv6    = 1 << 3
	RxHashSrcPortTCP = 1 << 4
	RxHashDstPortTCP = 1 << 5
	RxHashSrcPortUDP = 1 << 6
	RxHashDstPortUDP = 1 << 7
	rxHashKnown      = 0xff
)

// RSSKeyLen is the Toeplitz key's length: 40 bytes, enough for an IPv6
// 4-tuple (36 bytes) and the hash's 32 bits.
const RSSKeyLen = 40

// MaxRSSTable bounds an indirection table.
const MaxRSSTable = 256

// RSSConfig spreads an RSS QP's frames over Table by the Toeplitz hash
// (keyed with Key) of the fields Fields names, in the order of
// Microsoft's RSS specification: source address, destination address,
// source port, destination port. Table's length is a power of two.
type RSSConfig struct {
	Fields uint64
	Key    [RSSKeyLen]byte
	Table  []*QP
}

// SetRSS makes qp, a raw packet QP without queues, an RSS QP over c's
// work queues: raw packet QPs of this device with a receive queue.
func (qp *QP) SetRSS(c RSSConfig) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("rdma: RSS on QP %#x: %s: %w", qp.qpn, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if qp.init.QPType != QPTypeRawPacket || qp.init.Cap.MaxSendWR != 0 || qp.init.Cap.MaxRecvWR != 0 {
		return fail("only a raw packet QP without queues takes an indirection table")
	}
	n := len(c.Table)
	if n == 0 || n > MaxRSSTable || n&(n-1) != 0 {
		return fail("table of %d entries (a power of two up to %d)", n, MaxRSSTable)
	}
	if c.Fields&^rxHashKnown != 0 {
		return fail("unknown hash fields %#x", c.Fields&^rxHashKnown)
	}
	for i, w := range c.Table {
		if w == nil || w.dev != qp.dev || w.init.QPType != QPTypeRawPacket || w.init.Cap.MaxRecvWR == 0 {
			return fail("table entry %d is not a receive work queue of this device", i)
		}
	}
	r := &rssConf{fields: c.Fields, key: c.Key, table: slices.Clone(c.Table)}
	qp.rss.Store(r)
	return nil
}

// rssConf is an RSS QP's configuration; immutable once stored.
type rssConf struct {
	fields uint64
	key    [RSSKeyLen]byte
	table  []*QP
}

// pick returns the work queue of the table for the frame of k.
func (r *rssConf) pick(k *FlowKey) *QP {
	var in [36]byte
	n := 0
	add := func(b []byte) { n += copy(in[n:], b) }
	f := r.fields
	switch k.IPVersion {
	case 4:
		if f&RxHashSrcIPv4 != 0 {
			add(k.Src[:4])
		}
		if f&RxHashDstIPv4 != 0 {
			add(k.Dst[:4])
		}
	case 6:
		if f&RxHashSrcIPv6 != 0 {
			add(k.Src[:])
		}
		if f&RxHashDstIPv6 != 0 {
			add(k.Dst[:])
		}
	}
	if k.HasPorts {
		src, dst := uint64(RxHashSrcPortUDP), uint64(RxHashDstPortUDP)
		if k.Proto == ProtoTCP {
			src, dst = RxHashSrcPortTCP, RxHashDstPortTCP
		}
		if f&src != 0 {
			add([]byte{byte(k.SrcPort >> 8), byte(k.SrcPort)})
		}
		if f&dst != 0 {
			add([]byte{byte(k.DstPort >> 8), byte(k.DstPort)})
		}
	}
	h := Toeplitz(r.key[:], in[:n])
	return r.table[h&uint32(len(r.table)-1)]
}

// Toeplitz is the Toeplitz hash of in under key (Microsoft's RSS
// specification): for each set bit of in, from the first byte's high
// bit on, the 32 bits of key from that bit's position are XORed into
// the result. Key bits past the key's end are zero.
func Toeplitz(key, in []byte) uint32 {
	bit := func(i int) uint32 {
		if i/8 >= len(key) {
			return 0
		}
		return uint32(key[i/8]>>(7-i%8)) & 1
	}
	var w uint32 // the key's 32 bits from position pos
	for i := range 32 {
		w = w<<1 | bit(i)
	}
	var h uint32
	pos := 32
	for _, b := range in {
		for j := 7; j >= 0; j-- {
			if b>>j&1 != 0 {
				h ^= w
			}
			w = w<<1 | bit(pos)
			pos++
		}
	}
	return h
}
