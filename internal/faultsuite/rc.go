package faultsuite

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/rdma"
)

// bufLayout places the regions of one endpoint's registered buffer, each
// slot MaxSize bytes:
//
//	local   Window slots: the stream's SEND and WRITE sources, READ
//	        destinations and atomic results (slot seq % Window)
//	target  Window slots: where the peer's stream WRITEs (slot seq % Window)
//	recv    recvSlots slots: the receiver's buffers (slot n % recvSlots)
//	readSrc 2×MaxSize bytes of a fixed pattern the peer READs from
//
// A slot is reused only after the op that used it was checked. The READ
// source is written once, before any traffic, because a duplicate READ
// request (a fabric duplicate, a retransmission crossing its response)
// is served again from memory after the READ completed.
type bufLayout struct {
	slot                uint64
	local, target, recv uint64
	readSrc             uint64
	lkey                uint32
	window, maxSize     int
}

func layout(c Config, e *rack.Endpoint) bufLayout {
	slot := uint64(c.MaxSize)
	l := bufLayout{slot: slot, window: c.Window, maxSize: c.MaxSize, lkey: e.MR.LKey}
	l.local = e.Buf
	l.target = l.local + uint64(c.Window)*slot
	l.recv = l.target + uint64(c.Window)*slot
	l.readSrc = l.recv + recvSlots*slot
	return l
}

func (l *bufLayout) localSlot(seq int) uint64  { return l.local + uint64(seq%l.window)*l.slot }
func (l *bufLayout) targetSlot(seq int) uint64 { return l.target + uint64(seq%l.window)*l.slot }
func (l *bufLayout) recvSlot(n int) uint64     { return l.recv + uint64(n%recvSlots)*l.slot }

// stream is one direction of an RC connection: the ops its QP requests,
// posted in order with up to Window in flight. Owned by its goroutine.
type stream struct {
	suite *suite
	id    int
	name  string // host1>host2/qp0
	local *rack.Endpoint
	lay   bufLayout
	ops   []op

	remote      *rack.Endpoint // the peer endpoint
	peer        *stream        // the stream the other way
	peerRecv    *receiver      // the receiver that takes this stream's SENDs
	peerAtomics *hostAtomics
	atomicKey   uint32 // rkey of the peer's atomic words
	windowKey   uint32 // R_Key of the peer's window over its target slots
	readSrc     []byte // this endpoint's READ source, as written

	// lastSeen is the value this stream last saw in each CMP_AND_SWP
	// word of the peer: the next compare.
	lastSeen [swapWords]uint64
	buf      []byte
	checked  int // ops completed and checked, read after run returns
}

// readSeed and payloadSeed name the patterns: the READ source of stream
// id's endpoint, and op seq of stream id.
func readSeed(id int) uint64             { return 1<<63 | uint64(id) }
func payloadSeed(id int, seq int) uint64 { return uint64(id)<<40 | uint64(seq) }

// immFor is the immediate of op seq of stream id.
func immFor(id, seq int) uint32 { return uint32(id)<<24 | uint32(seq)&0xFFFFFF }

// opError says which op failed which check.
func (st *stream) opError(o *op, format string, a ...any) error {
	return fmt.Errorf("faultsuite: stream %s op %d (%v %d B): %s", st.name, o.seq, o.kind, o.size, fmt.Sprintf(format, a...))
}

// pollTimeout bounds the wait for one completion: well past the time the
// engine takes to give up on a request (retry_cnt+1 ACK timeouts).
func pollTimeout(c Config) time.Duration {
	ack := time.Duration(4096<<c.Timeout) * time.Nanosecond
	return 30*time.Second + 16*ack
}

func (st *stream) run(ctx context.Context) error {
	p := rack.NewPoller(st.local.SendCQ, st.local.SendEvents)
	p.Timeout = pollTimeout(st.suite.cfg)
	st.buf = make([]byte, st.lay.maxSize)
	var wrs []rdma.SendWR
	for next, done := 0, 0; done < len(st.ops); {
		wrs = wrs[:0]
		for next < len(st.ops) && next-done < st.lay.window {
			if o := &st.ops[next]; o.recv >= 0 && !st.suite.cfg.RNR && int64(o.recv) >= st.peerRecv.posted.Load() {
				break // no receive posted for it yet
			}
			wr, err := st.prepare(&st.ops[next])
			if err != nil {
				return err
			}
			wrs = append(wrs, wr)
			next++
		}
		if len(wrs) > 0 {
			if err := st.local.QP.PostSend(wrs); err != nil {
				return fmt.Errorf("faultsuite: stream %s: post ops %d..%d: %w", st.name, next-len(wrs), next-1, err)
			}
		}
		if next == done {
			// Nothing in flight: wait for the peer to post a receive.
			select {
			case <-st.peerRecv.credit:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		o := &st.ops[done]
		wc, err := p.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return flushed(wc, retryHint(wc, st.opError(o, "waiting for its completion: %v", err)))
		}
		if wc.WRID != uint64(o.seq) {
			return st.opError(o, "completion for op %d came first: out of order, duplicated or lost", wc.WRID)
		}
		if wc.Opcode != kinds[o.kind].wc {
			return st.opError(o, "completion opcode %v, want %v", wc.Opcode, kinds[o.kind].wc)
		}
		if err := st.check(o); err != nil {
			return err
		}
		st.suite.done.Add(1)
		done++
		st.checked = done
	}
	return nil
}

// prepare writes what op o needs into memory (its payload, or the
// complement of the data it must bring, so that any byte left unwritten
// shows) and returns its work request.
func (st *stream) prepare(o *op) (rdma.SendWR, error) {
	l := &st.lay
	mem := st.local.Host.Memory
	ki := kinds[o.kind]
	wr := rdma.SendWR{WRID: uint64(o.seq), Opcode: ki.opcode, SendFlags: rdma.SendSignaled,
		SGList: []rdma.SGE{{Addr: l.localSlot(o.seq), Length: uint32(o.size), LKey: l.lkey}}}
	b := st.buf[:o.size]
	var err error
	switch o.kind {
	case Send, Write, WriteImm, WriteMW:
		fillPattern(b, payloadSeed(st.id, o.seq))
		err = mem.WriteAt(b, l.localSlot(o.seq))
		if o.kind != Send {
			// The target slot was last written by this stream's op
			// seq-Window, already checked; nothing else writes it.
			complement(b)
			rl := &st.peer.lay
			wr.RemoteAddr, wr.RKey = rl.targetSlot(o.seq), st.remote.MR.RKey
			if o.kind == WriteMW {
				wr.RKey = st.windowKey
			}
			if err == nil {
				err = st.remote.Host.Memory.WriteAt(b, wr.RemoteAddr)
			}
			wr.ImmData = immFor(st.id, o.seq)
		}
	case Read:
		copy(b, st.peer.readSrc[o.readOff:])
		complement(b)
		err = mem.WriteAt(b, l.localSlot(o.seq))
		wr.RemoteAddr, wr.RKey = st.peer.lay.readSrc+uint64(o.readOff), st.remote.MR.RKey
	case FetchAdd, CmpSwap:
		binary.LittleEndian.PutUint64(b, 0xBAD0_0000_0000_0000|uint64(o.seq))
		err = mem.WriteAt(b, l.localSlot(o.seq))
		wr.RemoteAddr, wr.RKey = st.peerAtomics.addr+8*uint64(o.word), st.atomicKey
		wr.CompareAdd = o.add
		if o.kind == CmpSwap {
			// Swap values are unique to (stream, op) and never 0, the
			// words' first value, so every value a word holds names the
			// op that put it there.
			o.compare, o.swap = st.lastSeen[o.word-addWords], uint64(st.id+1)<<32|uint64(o.seq+1)
			wr.CompareAdd, wr.Swap = o.compare, o.swap
		}
	}
	if err != nil {
		return wr, st.opError(o, "prepare: %v", err)
	}
	return wr, nil
}

// check verifies a completed op: the data where it landed, or the value an
// atomic returned (recorded for the final ledger check).
func (st *stream) check(o *op) error {
	l := &st.lay
	b := st.buf[:o.size]
	var mem *rdma.HostMemory
	var addr uint64
	switch o.kind {
	case Send:
		return nil // the peer's receiver checks the data
	case Write, WriteImm, WriteMW:
		mem, addr = st.remote.Host.Memory, st.peer.lay.targetSlot(o.seq)
	default:
		mem, addr = st.local.Host.Memory, l.localSlot(o.seq)
	}
	if st.suite.cfg.tamper != nil {
		st.suite.cfg.tamper(st, o, mem, addr)
	}
	if err := mem.ReadAt(b, addr); err != nil {
		return st.opError(o, "read result: %v", err)
	}
	switch o.kind {
	case Write, WriteImm, WriteMW:
		if i, got, want := diffPattern(b, payloadSeed(st.id, o.seq)); i >= 0 {
			return st.opError(o, "data at the target differs at byte %d: got %#02x, want %#02x", i, got, want)
		}
	case Read:
		want := st.peer.readSrc[o.readOff : o.readOff+o.size]
		for i := range b {
			if b[i] != want[i] {
				return st.opError(o, "data read from offset %d differs at byte %d: got %#02x, want %#02x",
					o.readOff, i, b[i], want[i])
			}
		}
	case FetchAdd:
		st.peerAtomics.record(entry{stream: st.name, seq: o.seq, word: o.word, old: binary.LittleEndian.Uint64(b), add: o.add})
	case CmpSwap:
		old := binary.LittleEndian.Uint64(b)
		st.peerAtomics.record(entry{stream: st.name, seq: o.seq, word: o.word, old: old, compare: o.compare, swap: o.swap})
		if old == o.compare {
			st.lastSeen[o.word-addWords] = o.swap
		} else {
			st.lastSeen[o.word-addWords] = old
		}
	}
	return nil
}

// finish checks that no completion came after the last op's.
func (st *stream) finish() error {
	wc := make([]rdma.WC, 1)
	if st.local.SendCQ.Poll(wc) != 0 {
		return fmt.Errorf("stream %s: a completion (WRID %d, %v) after all %d ops completed", st.name, wc[0].WRID, wc[0].Opcode, len(st.ops))
	}
	return nil
}

// receiver keeps receives posted at one endpoint and checks what consumes
// them: the SENDs and WRITE_IMMs of the stream the other way, which must
// arrive in that stream's order, once each. Owned by its goroutine.
//
// Unless Config.RNR, the stream posts an op that consumes a receive only
// once that receive is posted, the credit-based flow control applications
// use; so no RNR NAK is needed.
type receiver struct {
	suite  *suite
	ep     *rack.Endpoint
	lay    bufLayout
	from   *stream // the stream whose ops land here
	expect []*op   // from's SENDs and WRITE_IMMs, in order
	// posted counts the receives posted so far; credit is signalled
	// after each.
	posted atomic.Int64
	credit chan struct{}
}

func (rv *receiver) run(ctx context.Context) error {
	st := rv.from
	p := rack.NewPoller(rv.ep.RecvCQ, rv.ep.RecvEvents)
	p.Timeout = pollTimeout(rv.suite.cfg)
	buf := make([]byte, rv.lay.maxSize)
	mem := rv.ep.Host.Memory
	posted := 0
	post := func() error {
		// Receive n takes from's n-th SEND or WRITE_IMM. Its slot gets
		// the complement of the SEND it will hold.
		n := posted
		o := rv.expect[n]
		b := buf[:o.size]
		fillPattern(b, payloadSeed(st.id, o.seq))
		complement(b)
		if err := mem.WriteAt(b, rv.lay.recvSlot(n)); err != nil {
			return err
		}
		err := rv.ep.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(n),
			SGList: []rdma.SGE{{Addr: rv.lay.recvSlot(n), Length: uint32(rv.lay.slot), LKey: rv.lay.lkey}}}})
		if err != nil {
			return err
		}
		posted++
		rv.posted.Store(int64(posted))
		select {
		case rv.credit <- struct{}{}:
		default:
		}
		return nil
	}
	// With RNR the receiver keeps only rnrDepth receives posted, so the
	// stream's window outruns it and the responder answers RNR NAKs.
	depth := recvSlots
	if rv.suite.cfg.RNR {
		depth = rnrDepth
	}
	for posted < len(rv.expect) && posted < depth {
		if err := post(); err != nil {
			return fmt.Errorf("faultsuite: %s: post receive: %w", rv.ep.Host.Name, err)
		}
	}
	for n, o := range rv.expect {
		wc, err := p.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return flushed(wc, st.opError(o, "waiting for its receive completion at %s: %v", rv.ep.Host.Name, err))
		}
		if wc.WRID != uint64(n) {
			return st.opError(o, "receive %d completed where receive %d was due: out of order, duplicated or lost", wc.WRID, n)
		}
		want := rdma.WCRecv
		if o.kind == WriteImm {
			want = rdma.WCRecvRDMAWithImm
		}
		switch {
		case wc.Opcode != want:
			return st.opError(o, "receive completion opcode %v, want %v", wc.Opcode, want)
		case int(wc.ByteLen) != o.size:
			return st.opError(o, "receive completion of %d B", wc.ByteLen)
		case o.kind == WriteImm && wc.ImmData != immFor(st.id, o.seq):
			return st.opError(o, "immediate %#x, want %#x (immediates out of sequence)", wc.ImmData, immFor(st.id, o.seq))
		case o.kind == WriteImm && wc.WCFlags&rdma.WCWithImm == 0:
			return st.opError(o, "receive completion without the immediate flag")
		}
		if o.kind == Send {
			addr := rv.lay.recvSlot(n)
			if rv.suite.cfg.tamper != nil {
				rv.suite.cfg.tamper(st, o, mem, addr)
			}
			b := buf[:o.size]
			if err := mem.ReadAt(b, addr); err != nil {
				return st.opError(o, "read receive buffer: %v", err)
			}
			if i, got, want := diffPattern(b, payloadSeed(st.id, o.seq)); i >= 0 {
				return st.opError(o, "data received at %s differs at byte %d: got %#02x, want %#02x", rv.ep.Host.Name, i, got, want)
			}
		}
		if posted < len(rv.expect) && posted-n-1 < depth {
			if err := post(); err != nil {
				return fmt.Errorf("faultsuite: %s: post receive: %w", rv.ep.Host.Name, err)
			}
		}
	}
	return nil
}

// finish checks that no receive completed after the last expected one.
func (rv *receiver) finish() error {
	wc := make([]rdma.WC, 1)
	if rv.ep.RecvCQ.Poll(wc) != 0 {
		return fmt.Errorf("%s: a receive completion (WRID %d, %v) after all %d expected from stream %s",
			rv.ep.Host.Name, wc[0].WRID, wc[0].Opcode, len(rv.expect), rv.from.name)
	}
	return nil
}

// retryHint explains RetryExcErr, which a stalled machine causes as
// surely as lost frames.
func retryHint(wc rdma.WC, err error) error {
	if wc.Status == rdma.WCRetryExcErr {
		return fmt.Errorf("%w (retries run out after retry_cnt+1 ACK timeouts without progress: lost frames, or a machine too loaded to answer in time; a larger Config.Timeout, --timeout, tells them apart)", err)
	}
	return err
}

// flushError is a completion flushed because its QP went to the error
// state: a consequence, reported only when no cause was found.
type flushError struct{ error }

func (e flushError) Unwrap() error { return e.error }

func flushed(wc rdma.WC, err error) error {
	if wc.Status == rdma.WCWRFlushErr {
		return flushError{err}
	}
	return err
}
