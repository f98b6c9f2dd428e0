package faultsuite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/rdma"
)

// The datagram flows. Every host has one UD QP; it joins udGroup, and it
// sends the suite's UD_SEND and UD_MCAST ops (in order, each completing
// locally). UD is unreliable: a datagram the fabric drops is lost, one it
// duplicates arrives twice, one it corrupts fails its ICRC and is lost.
// What must never happen is a datagram accepted with wrong data, from a
// sender or with a sequence that was never sent, or to a receiver it was
// not addressed to. Each datagram carries its own check:
//
//	[0:4]   "HUDP"
//	[4:8]   sender host index
//	[8:16]  sequence number in the sender's flow
//	[16:20] CRC-32 of bytes [20:]
//	[20:]   the pattern of (sender, sequence)
//
// Senders keep at most udWindow datagrams beyond what each receiver has
// taken, waiting up to udStall for the rest (a lost datagram never
// arrives), so receive queues do not overflow: loss comes from the
// faults, not from the test. Receivers count what arrives; the report
// gives sent, delivered, lost and duplicated, and the run fails on a
// single bad datagram.

const (
	udRecvDepth = 128
	udWindow    = 32
	udStall     = 20 * time.Millisecond
	udQuiet     = 300 * time.Millisecond // receivers stop after the senders and this much silence
	udHeader    = 20
	udQKey      = 0x4855_4450
)

// udGroup is the multicast group of the UD flows.
var udGroup = netip.MustParseAddr("::ffff:239.72.85.1").As16()

// udHost is one host's UD endpoint: its sender flow and its receiver.
type udHost struct {
	suite *suite
	idx   int
	ep    *rack.UDEndpoint
	ahs   []*rdma.AH // by host index; nil for itself
	group *rdma.AH
	ops   []op
	sent  int // ops sent and completed (sender goroutine)

	// arrived[i] counts datagrams from host i taken here (duplicates
	// included): the senders' flow control reads it.
	arrived []atomic.Int64
	// seen[i] holds the sequences of host i that arrived (receiver
	// goroutine; read after both finished).
	seen []map[uint64]int

	delivered, duplicates, mcastDelivered atomic.Int64
}

// UDReport sums the datagram flows.
type UDReport struct {
	Sent           int   `json:"sent"`            // UD_SEND ops sent
	McastSent      int   `json:"mcast_sent"`      // UD_MCAST ops sent
	Expected       int   `json:"expected"`        // deliveries they should make (multicast: one per other host)
	Delivered      int64 `json:"delivered"`       // distinct datagrams taken, checked
	Lost           int64 `json:"lost"`            // expected - delivered
	Duplicates     int64 `json:"duplicates"`      // datagrams taken again
	McastDelivered int64 `json:"mcast_delivered"` // of Delivered, multicast
	Stalls         int64 `json:"stalls"`          // sender waits that ended at udStall (a datagram lost)
}

func (s *suite) setupUD() error {
	c := s.cfg
	span := 40 + c.MTU
	for i, h := range s.hosts {
		ep, err := rack.NewUD(h, rack.UDOptions{BufSize: uint64(udWindow*c.MTU + udRecvDepth*span), SendDepth: udWindow,
			RecvDepth: udRecvDepth, QKey: udQKey, Events: true})
		if err != nil {
			return fmt.Errorf("faultsuite: %w", err)
		}
		u := &udHost{suite: s, idx: i, ep: ep, arrived: make([]atomic.Int64, c.Hosts), seen: make([]map[uint64]int, c.Hosts)}
		for j := range u.seen {
			u.seen[j] = map[uint64]int{}
		}
		if err := ep.QP.AttachMcast(udGroup, 0); err != nil {
			return fmt.Errorf("faultsuite: %s: %w", h.Name, err)
		}
		if u.group, err = ep.GroupAH(udGroup); err != nil {
			return err
		}
		u.ahs = make([]*rdma.AH, c.Hosts)
		for j, peer := range s.hosts {
			if j != i {
				if u.ahs[j], err = ep.AHTo(peer); err != nil {
					return err
				}
			}
		}
		for k := range udRecvDepth {
			if err := u.postRecv(k); err != nil {
				return fmt.Errorf("faultsuite: %s: post receive: %w", h.Name, err)
			}
		}
		s.ud = append(s.ud, u)
	}
	return nil
}

func (u *udHost) span() int { return 40 + u.suite.cfg.MTU }

func (u *udHost) recvAddr(n int) uint64 {
	return u.ep.Buf + uint64(udWindow*u.suite.cfg.MTU) + uint64(n%udRecvDepth*u.span())
}

func (u *udHost) postRecv(n int) error {
	return u.ep.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(n), SGList: u.ep.SGE(int(u.recvAddr(n)-u.ep.Buf), u.span())}})
}

// datagram fills b with the datagram of (from, seq).
func datagram(b []byte, from int, seq uint64) {
	fillPattern(b[udHeader:], udSeed(from, seq))
	copy(b, "HUDP")
	binary.BigEndian.PutUint32(b[4:], uint32(from))
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint32(b[16:], crc32.ChecksumIEEE(b[udHeader:]))
}

func udSeed(from int, seq uint64) uint64 { return 0x5544<<48 | uint64(from)<<40 | seq }

// sender is the UD flow of one host.
type udSender struct{ *udHost }

// run sends the host's datagrams in order, each completing locally.
func (f udSender) run(ctx context.Context) error {
	u := f.udHost
	s := u.suite
	pl := rack.NewPoller(u.ep.SendCQ, u.ep.SendEvents)
	buf := make([]byte, s.cfg.MTU)
	sentTo := make([]int64, s.cfg.Hosts)
	defer func() { s.udSendersDone.Add(1) }()
	for i := range u.ops {
		o := &u.ops[i]
		// Flow control: no receiver more than udWindow behind.
		for _, j := range u.targets(o) {
			deadline := time.Now().Add(udStall)
			for sentTo[j]-s.ud[j].arrived[u.idx].Load() >= udWindow {
				if time.Now().After(deadline) {
					s.udStalls.Add(1)
					break
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
		b := buf[:o.size]
		datagram(b, u.idx, uint64(o.seq))
		slot := o.seq % udWindow
		addr := u.ep.Buf + uint64(slot*s.cfg.MTU)
		if err := u.ep.Host.Memory.WriteAt(b, addr); err != nil {
			return err
		}
		wr := rdma.SendWR{WRID: uint64(o.seq), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: u.ep.SGE(slot*s.cfg.MTU, o.size), RemoteQKey: udQKey, AH: u.group}
		if o.to >= 0 {
			wr.AH, wr.RemoteQPN = u.ahs[o.to], s.ud[o.to].ep.QP.QPN()
		}
		if err := u.ep.QP.PostSend([]rdma.SendWR{wr}); err != nil {
			return u.opError(o, "post: %v", err)
		}
		wc, err := pl.Next(ctx)
		if err != nil {
			return u.opError(o, "waiting for its completion: %v", err)
		}
		if wc.WRID != uint64(o.seq) || wc.Opcode != rdma.WCSend {
			return u.opError(o, "completion %+v, want WR %d SEND", wc, o.seq)
		}
		for _, j := range u.targets(o) {
			sentTo[j]++
		}
		u.sent++
		s.done.Add(1)
	}
	return nil
}

// targets are the hosts a datagram is for.
func (u *udHost) targets(o *op) []int {
	if o.to >= 0 {
		return []int{o.to}
	}
	var t []int
	for j := range u.suite.cfg.Hosts {
		if j != u.idx {
			t = append(t, j)
		}
	}
	return t
}

func (u *udHost) opError(o *op, format string, a ...any) error {
	return fmt.Errorf("faultsuite: UD flow of %s op %d (%v %d B): %s", u.ep.Host.Name, o.seq, o.kind, o.size,
		fmt.Sprintf(format, a...))
}

func (f udSender) finish() error { return nil }

// receiver is the UD receive side of one host.
type udReceiver struct{ *udHost }

// run takes datagrams until every sender is done and none came for
// udQuiet; each must be a datagram some host sent to this one.
func (f udReceiver) run(ctx context.Context) error {
	u := f.udHost
	s := u.suite
	pl := rack.NewPoller(u.ep.RecvCQ, u.ep.RecvEvents)
	pl.Timeout = udQuiet
	span := u.span()
	scratch := make([]byte, span)
	want := make([]byte, s.cfg.MTU)
	for {
		wc, err := pl.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if wc.Status != rdma.WCSuccess {
				return fmt.Errorf("faultsuite: %s: UD receive completed with %v", u.ep.Host.Name, wc.Status)
			}
			if s.udSendersDone.Load() == int64(len(s.ud)) {
				return nil // quiet after the senders finished
			}
			continue // a quiet moment while senders wait out a loss
		}
		addr := u.recvAddr(int(wc.WRID))
		n := int(wc.ByteLen) - 40
		if n < udHeader || n > s.cfg.MTU {
			return fmt.Errorf("faultsuite: %s: a datagram of %d bytes", u.ep.Host.Name, n)
		}
		if err := u.ep.Host.Memory.ReadAt(scratch[:40+n], addr); err != nil {
			return err
		}
		d := scratch[40 : 40+n]
		if s.cfg.tamperUD != nil {
			s.cfg.tamperUD(u.idx, d)
		}
		from := int(binary.BigEndian.Uint32(d[4:]))
		seq := binary.BigEndian.Uint64(d[8:])
		if !bytes.Equal(d[:4], []byte("HUDP")) || from < 0 || from >= len(s.ud) || from == u.idx ||
			binary.BigEndian.Uint32(d[16:]) != crc32.ChecksumIEEE(d[udHeader:]) {
			return fmt.Errorf("faultsuite: %s: a datagram that was never sent (header %x): silent corruption", u.ep.Host.Name, d[:udHeader])
		}
		src := s.ud[from]
		if seq >= uint64(len(src.ops)) || src.ops[seq].size != n || wc.SrcQP != src.ep.QP.QPN() {
			return fmt.Errorf("faultsuite: %s: datagram %d of %s does not match what was sent (%d B, source QP %#x)",
				u.ep.Host.Name, seq, src.ep.Host.Name, n, wc.SrcQP)
		}
		o := &src.ops[seq]
		if o.to >= 0 && o.to != u.idx {
			return fmt.Errorf("faultsuite: %s: took datagram %d of %s, which was sent to host%d", u.ep.Host.Name, seq,
				src.ep.Host.Name, o.to+1)
		}
		want = want[:n]
		datagram(want, from, seq)
		if !bytes.Equal(d, want) {
			return fmt.Errorf("faultsuite: %s: datagram %d of %s: payload differs", u.ep.Host.Name, seq, src.ep.Host.Name)
		}
		if u.seen[from][seq]++; u.seen[from][seq] > 1 {
			u.duplicates.Add(1)
		} else {
			u.delivered.Add(1)
			if o.to < 0 {
				u.mcastDelivered.Add(1)
			}
		}
		u.arrived[from].Add(1)
		if err := u.postRecv(int(wc.WRID) + udRecvDepth); err != nil {
			return err
		}
	}
}

func (f udReceiver) finish() error { return nil }

// udTotals sums the datagram flows into a report and checks that no
// receiver took more distinct datagrams than were sent to it.
func (s *suite) udTotals() (UDReport, error) {
	var r UDReport
	var errs []error
	expectAt := make([]int, len(s.ud))
	for _, u := range s.ud {
		for _, o := range u.ops[:u.sent] {
			for _, j := range u.targets(&o) {
				expectAt[j]++
			}
			if o.to < 0 {
				r.McastSent++
			} else {
				r.Sent++
			}
		}
	}
	for j, u := range s.ud {
		d := u.delivered.Load()
		r.Delivered += d
		r.Duplicates += u.duplicates.Load()
		r.McastDelivered += u.mcastDelivered.Load()
		r.Expected += expectAt[j]
		if d > int64(expectAt[j]) {
			errs = append(errs, fmt.Errorf("faultsuite: %s took %d distinct datagrams, %d were sent to it", u.ep.Host.Name, d, expectAt[j]))
		}
	}
	r.Lost = int64(r.Expected) - r.Delivered
	r.Stalls = s.udStalls.Load()
	return r, errors.Join(errs...)
}
