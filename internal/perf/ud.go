package perf

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/rdma"
)

// udPair is two UD endpoints that know each other's address.
type udPair struct {
	c, s         *rack.UDEndpoint
	cAH, sAH     *rdma.AH
	cSend, cRx   *rack.Poller
	sSend, sRx   *rack.Poller
	cQPN, sQPN   uint32
	cQKey, sQKey uint32
}

func connectUD(a, b *rack.Host, bufSize int, recvDepth int) (*udPair, error) {
	o := rack.UDOptions{BufSize: uint64(bufSize), Events: true, RecvDepth: recvDepth}
	c, err := rack.NewUD(a, o)
	if err != nil {
		return nil, err
	}
	s, err := rack.NewUD(b, o)
	if err != nil {
		c.Close()
		return nil, err
	}
	p := &udPair{c: c, s: s, cQPN: c.QP.QPN(), sQPN: s.QP.QPN(), cQKey: c.QKey, sQKey: s.QKey,
		cSend: rack.NewPoller(c.SendCQ, c.SendEvents), cRx: rack.NewPoller(c.RecvCQ, c.RecvEvents),
		sSend: rack.NewPoller(s.SendCQ, s.SendEvents), sRx: rack.NewPoller(s.RecvCQ, s.RecvEvents)}
	if p.cAH, err = c.AHTo(b); err == nil {
		p.sAH, err = s.AHTo(a)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *udPair) close() { p.c.Close(); p.s.Close() }

// checkGRH checks the 40-byte area a UD receive starts with: for RoCEv2
// over IPv4, 20 zero bytes and the IPv4 header from src to dst.
func checkGRH(area []byte, src, dst netip.Addr) error {
	if !bytes.Equal(area[:20], make([]byte, 20)) || area[20]>>4 != 4 {
		return fmt.Errorf("GRH area %x is not 20 zero bytes and an IPv4 header", area)
	}
	s, d := src.As4(), dst.As4()
	if !bytes.Equal(area[32:36], s[:]) || !bytes.Equal(area[36:40], d[:]) {
		return fmt.Errorf("GRH area names %v > %v, want %v > %v", netip.AddrFrom4([4]byte(area[32:36])),
			netip.AddrFrom4([4]byte(area[36:40])), src, dst)
	}
	return nil
}

// UDPingPong is ibv_ud_pingpong: UD QPs and address handles on both
// hosts; the client sends size bytes (at most the MTU), the server checks
// the GRH area, the payload and the source QP, and sends them back; iters
// round trips. The figure is µs per iteration.
func UDPingPong(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	mtu := a.Device.QueryPort().ActiveMTU.Bytes()
	if size < 1 || size > mtu {
		return Result{}, fmt.Errorf("ud pingpong: size %d outside 1..MTU %d", size, mtu)
	}
	span := rdma.GRHSize + size
	p, err := connectUD(a, b, 3*span, 16)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	crcs := make([]uint32, iters)
	for i := range crcs {
		crcs[i] = patternCRC(size, uint64(i))
	}
	// Layout per side: [0, span) receive buffer, [span, span+size) send.
	recv := func(e *rack.UDEndpoint, id int) error {
		return e.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(id), SGList: e.SGE(0, span)}})
	}
	// RoCEv2 datagrams always carry a GRH (the IP header); InfiniBand ones
	// between LIDs of one subnet carry none, and the completion then has
	// no GRH flag but the source LID.
	ib := a.IB()
	check := func(e *rack.UDEndpoint, wc rdma.WC, i int, from *rack.Host, fromQPN uint32, scratch []byte) error {
		hasGRH := wc.WCFlags&rdma.WCGRH != 0
		if wc.ByteLen != uint32(span) || hasGRH == ib || wc.SrcQP != fromQPN || (ib && wc.SLID != from.LID()) {
			return fmt.Errorf("iteration %d: completion %d bytes, flags %v, source QP %#x, SLID %d; want %d, GRH %v, %#x, %d",
				i, wc.ByteLen, wc.WCFlags, wc.SrcQP, wc.SLID, span, !ib, fromQPN, from.LID())
		}
		if err := e.Host.Memory.ReadAt(scratch, e.Buf); err != nil {
			return err
		}
		if !ib {
			if err := checkGRH(scratch[:rdma.GRHSize], from.IP, e.Host.IP); err != nil {
				return fmt.Errorf("iteration %d: %w", i, err)
			}
		}
		if crc32.ChecksumIEEE(scratch[rdma.GRHSize:]) != crcs[i] {
			return fmt.Errorf("iteration %d: received data differs from what was sent", i)
		}
		return nil
	}
	if err := recv(p.s, 0); err != nil {
		return Result{}, err
	}
	var elapsed time.Duration
	err = run2(ctx, func(ctx context.Context) error {
		scratch := make([]byte, span)
		for i := range iters {
			wc, err := p.sRx.Next(ctx)
			if err != nil {
				return err
			}
			if err := check(p.s, wc, i, a, p.cQPN, scratch); err != nil {
				return err
			}
			if err := p.s.Host.Memory.WriteAt(scratch[rdma.GRHSize:], p.s.Buf+uint64(span)); err != nil {
				return err
			}
			if i+1 < iters {
				if err := recv(p.s, i+1); err != nil {
					return err
				}
			}
			if err := p.s.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: p.s.SGE(span, size), AH: p.sAH, RemoteQPN: p.cQPN, RemoteQKey: p.cQKey}}); err != nil {
				return err
			}
			if _, err := p.sSend.Next(ctx); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context) error {
		buf := make([]byte, size)
		scratch := make([]byte, span)
		start := time.Now()
		for i := range iters {
			if err := recv(p.c, i); err != nil {
				return err
			}
			fillPattern(buf, uint64(i))
			if err := p.c.Host.Memory.WriteAt(buf, p.c.Buf+uint64(span)); err != nil {
				return err
			}
			if err := p.c.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: p.c.SGE(span, size), AH: p.cAH, RemoteQPN: p.sQPN, RemoteQKey: p.sQKey}}); err != nil {
				return err
			}
			if _, err := p.cSend.Next(ctx); err != nil {
				return err
			}
			wc, err := p.cRx.Next(ctx)
			if err != nil {
				return err
			}
			if err := check(p.c, wc, i, b, p.sQPN, scratch); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
		}
		elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	usec := float64(elapsed.Microseconds()) / float64(iters)
	return Result{Figure: usec, Unit: "us/iter", Size: size, Iters: iters, Elapsed: elapsed,
		Detail: fmt.Sprintf("%d UD round trips of %d B, GRH area (RoCE) or source LID (IB), source QP and every byte checked both ways", iters, size)}, nil
}

// SRQPingPong is ibv_srq_pingpong: numQP RC connections whose QPs share
// one SRQ and one CQ on each side. Iteration i goes over QP i mod numQP;
// the server checks the data and that the completion names that QP, and
// echoes on it. Receive WRs come from the SRQ in posting order.
func SRQPingPong(ctx context.Context, a, b *rack.Host, size, iters, numQP int) (Result, error) {
	depth := 2 * numQP
	ca, sb, err := rack.ConnectSRQ(a, b, rack.SRQOptions{BufSize: uint64((depth + 1) * size), NumQP: numQP,
		SRQDepth: depth, Events: true})
	if err != nil {
		return Result{}, err
	}
	defer func() { ca.Close(); sb.Close() }()
	crcs := make([]uint32, iters)
	for i := range crcs {
		crcs[i] = patternCRC(size, uint64(i))
	}
	// Receive slots 0..depth-1 cycle; the send buffer follows them.
	post := func(e *rack.SRQEndpoint, n int) error {
		return e.SRQ.PostRecv([]rdma.RecvWR{{WRID: uint64(n), SGList: e.SGE((n%depth)*size, size)}})
	}
	for n := range depth {
		if err := post(sb, n); err != nil {
			return Result{}, err
		}
		if err := post(ca, n); err != nil {
			return Result{}, err
		}
	}
	sendOff := depth * size
	// next returns the next receive completion, counting the sends it
	// skips (one CQ carries both).
	next := func(ctx context.Context, pl *rack.Poller, sends *int) (rdma.WC, error) {
		for {
			wc, err := pl.Next(ctx)
			if err != nil || wc.Opcode == rdma.WCRecv {
				return wc, err
			}
			*sends++
		}
	}
	check := func(e *rack.SRQEndpoint, wc rdma.WC, i int, scratch []byte) error {
		if int(wc.WRID) != i || wc.QPNum != e.QPs[i%numQP].QPN() || wc.ByteLen != uint32(size) {
			return fmt.Errorf("iteration %d: receive WR %d on QP %#x (%d B), want WR %d on QP %#x", i, wc.WRID,
				wc.QPNum, wc.ByteLen, i, e.QPs[i%numQP].QPN())
		}
		if err := e.Host.Memory.ReadAt(scratch, e.Buf+uint64((i%depth)*size)); err != nil {
			return err
		}
		if crc32.ChecksumIEEE(scratch) != crcs[i] {
			return fmt.Errorf("iteration %d: data differs from what was sent", i)
		}
		return post(e, i+depth)
	}
	var elapsed time.Duration
	err = run2(ctx, func(ctx context.Context) error {
		pl := rack.NewPoller(sb.CQ, sb.Events)
		scratch := make([]byte, size)
		sends := 0
		for i := range iters {
			wc, err := next(ctx, pl, &sends)
			if err != nil {
				return err
			}
			if err := check(sb, wc, i, scratch); err != nil {
				return err
			}
			if err := sb.Host.Memory.WriteAt(scratch, sb.Buf+uint64(sendOff)); err != nil {
				return err
			}
			if err := sb.QPs[i%numQP].PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend,
				SendFlags: rdma.SendSignaled, SGList: sb.SGE(sendOff, size)}}); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context) error {
		pl := rack.NewPoller(ca.CQ, ca.Events)
		buf := make([]byte, size)
		sends := 0
		start := time.Now()
		for i := range iters {
			fillPattern(buf, uint64(i))
			if err := ca.Host.Memory.WriteAt(buf, ca.Buf+uint64(sendOff)); err != nil {
				return err
			}
			if err := ca.QPs[i%numQP].PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend,
				SendFlags: rdma.SendSignaled, SGList: ca.SGE(sendOff, size)}}); err != nil {
				return err
			}
			wc, err := next(ctx, pl, &sends)
			if err != nil {
				return err
			}
			if err := check(ca, wc, i, buf); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
		}
		elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	usec := float64(elapsed.Microseconds()) / float64(iters)
	return Result{Figure: usec, Unit: "us/iter", Size: size, Iters: iters, Elapsed: elapsed,
		Detail: fmt.Sprintf("%d round trips of %d B over %d QPs sharing one SRQ each side; WR order, QP and data checked",
			iters, size, numQP)}, nil
}

// McastGroup is the group UDMulticast uses (an administratively scoped
// IPv4 group, as a RoCEv2 GID).
var McastGroup = netip.MustParseAddr("::ffff:239.42.0.1").As16()

// UDMulticast sends iters datagrams of size bytes from a UD QP on the
// first host to McastGroup, which a QP on every host joins (on the first
// host another QP than the sender). Every receiver must get every
// datagram exactly once, in order, intact, with the sender's QPN; the
// sender must not get its own. Sends go in windows no larger than the
// receive queues, the next window after every receiver drained the last
// one, so no datagram is lost for want of a buffer. The figure is
// datagrams delivered per second (sent x receivers).
func UDMulticast(ctx context.Context, hosts []*rack.Host, size, iters int) (Result, error) {
	if len(hosts) < 2 {
		return Result{}, fmt.Errorf("ud multicast: needs two hosts, have %d", len(hosts))
	}
	mtu := hosts[0].Device.QueryPort().ActiveMTU.Bytes()
	if size < 8 || size > mtu {
		return Result{}, fmt.Errorf("ud multicast: size %d outside 8..MTU %d", size, mtu)
	}
	const window = 32
	span := rdma.GRHSize + size
	group := McastGroup
	if hosts[0].IB() {
		group = rack.IBAllHosts
	}
	bufSize := window*span + size
	o := rack.UDOptions{BufSize: uint64(bufSize), Events: true, RecvDepth: window}
	sender, err := rack.NewUD(hosts[0], o)
	if err != nil {
		return Result{}, err
	}
	defer sender.Close()
	var recvs []*rack.UDEndpoint
	defer func() {
		for _, r := range recvs {
			r.Close()
		}
	}()
	for _, h := range hosts {
		r, err := rack.NewUD(h, o)
		if err != nil {
			return Result{}, err
		}
		recvs = append(recvs, r)
		if err := r.QP.AttachMcast(group, 0); err != nil {
			return Result{}, err
		}
	}
	// The sender joins too: it must not hear itself.
	if err := sender.QP.AttachMcast(group, 0); err != nil {
		return Result{}, err
	}
	if err := sender.QP.PostRecv([]rdma.RecvWR{{WRID: 1 << 40, SGList: sender.SGE(0, span)}}); err != nil {
		return Result{}, err
	}
	ah, err := sender.GroupAH(group)
	if err != nil {
		return Result{}, err
	}
	post := func(r *rack.UDEndpoint, n int) error {
		return r.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(n), SGList: r.SGE((n%window)*span, span)}})
	}
	for _, r := range recvs {
		for n := range window {
			if err := post(r, n); err != nil {
				return Result{}, err
			}
		}
	}
	senderQPN := sender.QP.QPN()
	sendPl := rack.NewPoller(sender.SendCQ, sender.SendEvents)
	start := time.Now()
	buf := make([]byte, size)
	for base := 0; base < iters; base += window {
		n := min(window, iters-base)
		for i := base; i < base+n; i++ {
			fillPattern(buf, uint64(i))
			binary.BigEndian.PutUint64(buf, uint64(i))
			off := window*span + 0
			if err := hosts[0].Memory.WriteAt(buf, sender.Buf+uint64(off)); err != nil {
				return Result{}, err
			}
			if err := sender.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: sender.SGE(off, size), AH: ah, RemoteQKey: sender.QKey}}); err != nil {
				return Result{}, err
			}
			if _, err := sendPl.Next(ctx); err != nil {
				return Result{}, err
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, len(recvs))
		for k, r := range recvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = drainMcast(ctx, r, base, n, window, span, size, hosts[0], group, senderQPN, post)
			}()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				return Result{}, fmt.Errorf("receiver %d on %s: %w", k, recvs[k].Host.Name, err)
			}
		}
	}
	elapsed := time.Since(start)
	if n := sender.RecvCQ.Poll(make([]rdma.WC, 1)); n != 0 {
		return Result{}, fmt.Errorf("the sender received its own multicast")
	}
	delivered := iters * len(recvs)
	rate := float64(delivered) / elapsed.Seconds()
	return Result{Figure: rate, Unit: "msg/s", Size: size, Iters: iters, Elapsed: elapsed,
		Detail: fmt.Sprintf("%d datagrams of %d B to %d receivers on %d hosts (%d deliveries), each exactly once, in order, intact, GRH checked",
			iters, size, len(recvs), len(hosts), delivered)}, nil
}

func drainMcast(ctx context.Context, r *rack.UDEndpoint, base, n, window, span, size int, from *rack.Host, group [16]byte,
	senderQPN uint32, post func(*rack.UDEndpoint, int) error) error {
	pl := rack.NewPoller(r.RecvCQ, r.RecvEvents)
	pl.Timeout = 10 * time.Second
	scratch := make([]byte, span)
	want := make([]byte, size)
	for i := base; i < base+n; i++ {
		wc, err := pl.Next(ctx)
		if err != nil {
			return fmt.Errorf("datagram %d: %w", i, err)
		}
		if int(wc.WRID) != i || wc.SrcQP != senderQPN || wc.ByteLen != uint32(span) {
			return fmt.Errorf("datagram %d: got WR %d from QP %#x (%d B), want WR %d from %#x", i, wc.WRID, wc.SrcQP,
				wc.ByteLen, i, senderQPN)
		}
		if err := r.Host.Memory.ReadAt(scratch, r.Buf+uint64((i%window)*span)); err != nil {
			return err
		}
		if err := checkGroupGRH(scratch[:rdma.GRHSize], from, group); err != nil {
			return fmt.Errorf("datagram %d: %w", i, err)
		}
		fillPattern(want, uint64(i))
		binary.BigEndian.PutUint64(want, uint64(i))
		if !bytes.Equal(scratch[rdma.GRHSize:], want) {
			return fmt.Errorf("datagram %d: payload differs (sequence %d)", i, binary.BigEndian.Uint64(scratch[rdma.GRHSize:]))
		}
		if err := post(r, i+window); err != nil {
			return err
		}
	}
	return nil
}

// UDSendBW is ib_send_bw -c UD: iters datagrams of size bytes (at most the
// MTU) from a to b. UD has no flow control, so the sender keeps at most a
// window of datagrams beyond what the receiver has taken, smaller than the
// receive queue: none is lost for want of a buffer. The receiver checks
// each datagram's sequence number and pattern; a gap is counted as lost
// (there should be none on the lossless class), never as data. The figure
// is MiB/s of payload delivered.
func UDSendBW(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	mtu := a.Device.QueryPort().ActiveMTU.Bytes()
	if size < 8 || size > mtu {
		return Result{}, fmt.Errorf("ud send bw: size %d outside 8..MTU %d", size, mtu)
	}
	const (
		recvSlots = 256
		window    = 192
	)
	span := rdma.GRHSize + size
	p, err := connectUD(a, b, recvSlots*span+slots*size, recvSlots)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	var received, lost atomic.Int64
	post := func(n int) error {
		return p.s.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(n), SGList: p.s.SGE((n%recvSlots)*span, span)}})
	}
	for n := range recvSlots {
		if err := post(n); err != nil {
			return Result{}, err
		}
	}
	// The sender's slots hold the patterns of seeds 0..slots-1, each
	// stamped with its sequence number before it goes.
	sendOff := recvSlots * span
	buf := make([]byte, size)
	var elapsed time.Duration
	err = run2(ctx, func(ctx context.Context) error {
		scratch := make([]byte, span)
		want := make([]byte, size)
		next := uint64(0)
		pl := p.sRx
		pl.Timeout = 2 * time.Second
		for n := 0; int(next) < iters; n++ {
			wc, err := pl.Next(ctx)
			if err != nil {
				if int(received.Load()+lost.Load()) < iters && ctx.Err() == nil {
					// Nothing more came: the rest is lost.
					lost.Add(int64(iters) - int64(next))
					return nil
				}
				return err
			}
			if err := p.s.Host.Memory.ReadAt(scratch, p.s.Buf+uint64(int(wc.WRID)%recvSlots*span)); err != nil {
				return err
			}
			seq := binary.BigEndian.Uint64(scratch[rdma.GRHSize:])
			if seq < next || seq >= uint64(iters) {
				return fmt.Errorf("datagram with sequence %d after %d (duplicate, reordered or corrupt)", seq, next)
			}
			fillPattern(want, seq%slots)
			binary.BigEndian.PutUint64(want, seq)
			if !bytes.Equal(scratch[rdma.GRHSize:], want) {
				return fmt.Errorf("datagram %d: payload differs from what was sent", seq)
			}
			lost.Add(int64(seq - next))
			next = seq + 1
			received.Add(1)
			if err := post(n + recvSlots); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context) error {
		start := time.Now()
		done := 0
		for i := 0; i < iters; i++ {
			for int64(i)-received.Load()-lost.Load() >= window {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(5 * time.Microsecond)
			}
			slot := i % slots
			fillPattern(buf, uint64(slot))
			binary.BigEndian.PutUint64(buf, uint64(i))
			if err := p.c.Host.Memory.WriteAt(buf, p.c.Buf+uint64(sendOff+slot*size)); err != nil {
				return err
			}
			if err := p.c.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: p.c.SGE(sendOff+slot*size, size), AH: p.cAH, RemoteQPN: p.sQPN, RemoteQKey: p.sQKey}}); err != nil {
				return err
			}
			// A slot is rewritten only after its send completed.
			for ; done <= i-slots+8 || (i == iters-1 && done < iters); done++ {
				if _, err := p.cSend.Next(ctx); err != nil {
					return err
				}
			}
		}
		for int(received.Load()+lost.Load()) < iters {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(10 * time.Microsecond)
		}
		elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	got := int(received.Load())
	r := bwResult(size, got, elapsed, fmt.Sprintf("UD, %d of %d datagrams delivered (%d lost), each checked", got, iters, lost.Load()))
	r.Iters = iters
	if got == 0 {
		return r, fmt.Errorf("no datagram arrived")
	}
	return r, nil
}

// checkGroupGRH checks the GRH area of a multicast datagram from host
// from to group: the IPv4 header on RoCEv2 (20 zero bytes first), the IB
// GRH (IP version 6, the sender's GID 0, the MGID) on InfiniBand.
func checkGroupGRH(area []byte, from *rack.Host, group [16]byte) error {
	if from.IB() {
		sgid, _ := from.Device.QueryGID(0)
		if area[0]>>4 != 6 || !bytes.Equal(area[8:24], sgid[:]) || !bytes.Equal(area[24:40], group[:]) {
			return fmt.Errorf("GRH %x: want version 6, SGID %x, DGID %x", area, sgid, group)
		}
		return nil
	}
	if !bytes.Equal(area[:20], make([]byte, 20)) || !bytes.Equal(area[32:36], from.IP.AsSlice()) ||
		!bytes.Equal(area[36:40], group[12:]) {
		return fmt.Errorf("GRH area %x does not name %v > %v", area, from.IP, netip.AddrFrom16(group).Unmap())
	}
	return nil
}
