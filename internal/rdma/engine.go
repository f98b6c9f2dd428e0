package rdma

import (
	"bytes"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// The engine is the device's transport "hardware". Whoever holds runMu owns
// every QP's transport state, the QP table, the ACK coalescing and
// send-scheduling lists and the loopback queue: the engine goroutine
// (engine.run), or a goroutine that brought work and runs it itself
// (Device.RunInline: the backend's doorbell and fabric receive goroutines,
// so that a frame or a doorbell is handled without waking another
// thread). Nothing in that state has a finer lock; other goroutines reach
// the engine only through:
//
//   - rx: frames from Deliver, bounded (DeviceConfig.RxQueueLen; an
//     rxQueue, one lock per batch). A full queue makes Deliver wait up to
//     DeviceConfig.RxWait, then drop the frame like a NIC whose receive
//     ring overflows; the bound keeps two engines that deliver to each
//     other from inside Port.Send from deadlocking.
//   - QP events: PostSend/PostRecv doorbells and timer expiries set bits in
//     QP.events and queue the QP on evList (one entry per QP however many
//     events), then kick wake (capacity 1).
//   - ctl: control requests (create/modify/query/destroy QP) run as closures
//     on the engine goroutine; the caller waits for completion.
//
// Completions leave through CQs (mutex-guarded rings). Frames leave through
// Port.Send, called only by runMu's holder with the engine's single
// transmit buffer (the Port copies what it keeps), or, for loopback, go to
// the engine-owned loopback queue in a pooled buffer.
//
// The rx queue is drained only under runMu, in order: the engine goroutine
// learns of new frames through wake, never by taking one off rx itself,
// so an inline runner and the engine goroutine cannot reorder a port's
// frames.

// Engine tuning.
const (
	rxBatch      = 64 // frames handled before ACKs are flushed and senders run
	inlineRounds = 64 // rounds an inline runner does before it hands over
	// stallCheck is how often the engine goroutine looks for flagged
	// work nobody ran (engine.run).
	stallCheck = 10 * time.Millisecond
	sendBudget = 16 // packets a QP may send per scheduling round
	// maxPortBacklog is how many frames a BackloggedPort may keep before
	// the engine stops starting new ones.
	maxPortBacklog = 256
	maxLoopQueue   = 8192 // loopback frames waiting; more are dropped (counted)
)

// Engine events, bits of QP.events.
const (
	evSQ    uint32 = 1 << iota // send work posted
	evRQ                       // receive work posted (only signaled in ERR)
	evRetry                    // the local ACK timer fired
	evRNR                      // the RNR timer fired
	evPace                     // the DCQCN pacing timer fired
)

// frameBuf is a pooled frame buffer. Ownership moves with the pointer:
// Deliver fills it and passes it to the engine through the rx queue; the
// engine returns it to the free list when done.
type frameBuf struct {
	n   int
	raw bool // a frame for a raw packet QP (a flow matched it: raw.go)
	b   [maxFrameSize]byte
}

type ctlReq struct {
	fn   func()
	done chan struct{}
}

type engine struct {
	d *Device

	rx   rxQueue
	ctl  chan *ctlReq
	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	evMu    sync.Mutex
	evList  []*QP
	evSpare []*QP

	idleMu      sync.Mutex
	idleWaiters []chan struct{}
	activity    atomic.Uint64

	// pend says work was brought that no round has looked at yet. A
	// producer sets it before it tries the run lock or wakes the engine
	// goroutine; a runner clears it under the lock before its round and
	// looks at it again after it unlocks. So a goroutine that finds the
	// lock taken can leave the work to the holder: nobody sleeps on
	// runMu on the data path.
	pend atomic.Bool
	// holds counts the goroutines between Device.HoldKick and RunInline:
	// while it is above zero, new work does not wake the engine
	// goroutine, since the holder runs it.
	holds atomic.Int32

	// runMu's holder owns what follows; stopped is set under it once
	// the engine goroutine has shut the engine down.
	runMu    sync.Mutex
	stopped  bool
	qps      map[uint32]*QP
	xsrqs    map[uint32]*SRQ    // XRC SRQs by number (xrc.go)
	mcast    map[[16]byte][]*QP // multicast groups and their UD QPs
	sendList []*QP
	ackList  []*QP
	loopQ    []*frameBuf
	loopHead int
	tx       frameBuf // transmit buffer for Port.Send
	ipID     uint16
}

func (e *engine) init(d *Device) {
	e.d = d
	e.rx.init(d.cfg.RxQueueLen)
	e.ctl = make(chan *ctlReq)
	e.wake = make(chan struct{}, 1)
	e.quit = make(chan struct{})
	e.done = make(chan struct{})
	e.qps = make(map[uint32]*QP)
	e.xsrqs = make(map[uint32]*SRQ)
	e.mcast = make(map[[16]byte][]*QP)
}

func (e *engine) getBuf() *frameBuf { return e.rx.get() }

func (e *engine) putBuf(b *frameBuf) { e.rx.put(b) }

// Deliver hands the engine a frame that arrived from the fabric. The frame
// is copied; the caller keeps its buffer. When the receive queue is full,
// Deliver waits up to DeviceConfig.RxWait (1 ms by default) for room, then
// drops the frame and counts it (RxDropped); frames after Close are
// dropped at once. Malformed frames, bad ICRCs and unknown QPs are counted
// and dropped by the engine. Safe for concurrent use; it allocates only
// when it has to wait.
func (d *Device) Deliver(frame []byte) { d.deliver(frame, false) }

// deliver is Deliver; raw marks a frame for the raw packet QPs
// (DeliverRaw).
func (d *Device) deliver(frame []byte, raw bool) {
	one := [1][]byte{frame}
	d.deliverBatch(one[:], raw)
}

// enqueue puts filled buffers on the receive queue, in order, waiting up
// to DeviceConfig.RxWait for room each time it is full; what still finds
// no room is dropped and counted.
func (e *engine) enqueue(bufs []*frameBuf) {
	for len(bufs) > 0 {
		k, room := e.rx.push(bufs)
		if k > 0 {
			e.kick()
		}
		bufs = bufs[k:]
		if room == nil {
			return
		}
		// Full: the frames queued must be handled for room to come,
		// by the engine goroutine even in a HoldKick (its holder waits
		// here).
		e.pend.Store(true)
		e.wakeEngine()
		ok := e.waitRoom(room)
		e.rx.doneWaiting()
		if !ok {
			e.rx.put(bufs...)
			e.d.ctr.rxDropped.Add(uint64(len(bufs)))
			return
		}
	}
}

// waitRoom waits up to DeviceConfig.RxWait for room to be closed; false
// when the time ran out or the engine stopped.
func (e *engine) waitRoom(room <-chan struct{}) bool {
	w := e.d.cfg.RxWait
	if w <= 0 {
		return false
	}
	t := time.NewTimer(w)
	defer t.Stop()
	select {
	case <-room:
		return true
	case <-t.C:
	case <-e.done:
	}
	return false
}

// DeliverBatch hands the engine the frames a port read in one batch
// (recvmmsg, a ring drain), each as Deliver does. They reach the receive
// queue back to back, so the engine takes them in one drain (up to
// rxBatch) and sends one coalesced ACK per QP for the lot. Safe for
// concurrent use; it allocates only when it has to wait.
func (d *Device) DeliverBatch(frames [][]byte) { d.deliverBatch(frames, false) }

// deliverBatch is DeliverBatch; raw marks the frames for the raw packet
// QPs. The frames go in chunks of up to rxBatch: one lock for their
// buffers, one to queue them.
func (d *Device) deliverBatch(frames [][]byte, raw bool) {
	if d.closed.Load() {
		d.ctr.rxDropped.Add(uint64(len(frames)))
		return
	}
	e := &d.eng
	var bufs [rxBatch]*frameBuf
	for len(frames) > 0 {
		chunk := frames[:min(len(frames), rxBatch)]
		frames = frames[len(chunk):]
		e.rx.getN(bufs[:len(chunk)])
		n := 0
		for _, f := range chunk {
			if len(f) > maxFrameSize {
				d.ctr.rxMalformed.Add(1)
				continue
			}
			bufs[n].n = copy(bufs[n].b[:], f)
			bufs[n].raw = raw
			n++
		}
		if n < len(chunk) {
			e.rx.put(bufs[n:len(chunk)]...)
		}
		e.enqueue(bufs[:n])
		clear(bufs[:len(chunk)])
	}
}

// signal records events for qp and makes sure the engine will look at it.
// Safe from any goroutine, including timer callbacks; never blocks.
func (e *engine) signal(qp *QP, ev uint32) {
	if qp.events.Or(ev) != 0 {
		return // already queued
	}
	e.evMu.Lock()
	e.evList = append(e.evList, qp)
	e.evMu.Unlock()
	e.kick()
}

func (e *engine) kick() {
	e.pend.Store(true)
	if e.holds.Load() > 0 {
		return // the holder's RunInline runs it
	}
	e.wakeEngine()
}

func (e *engine) wakeEngine() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// HoldKick tells the engine that the calling goroutine is about to bring
// it work (Deliver, posts through the QP API) and will run that work
// itself with RunInline, which must follow. Until then the work does not
// wake the engine goroutine.
func (d *Device) HoldKick() { d.eng.holds.Add(1) }

// RunInline runs the engine's pending work on the calling goroutine, when
// no other goroutine is running the engine, and ends a HoldKick when hold
// is true. It saves the hand-off to the engine goroutine (a thread
// wake-up) on the path of a doorbell or a received frame. The caller must
// hold no lock that a CQ sink, a Port or a QP event handler takes; it may
// hold no engine lock. Work it cannot finish in a few rounds, or that
// another goroutine is running, goes to the engine goroutine.
func (d *Device) RunInline(hold bool) {
	e := &d.eng
	if hold {
		e.holds.Add(-1)
	}
	if d.closed.Load() {
		e.wakeEngine()
		return
	}
	if e.drive(inlineRounds) {
		e.wakeEngine()
	}
}

// TxReady tells the engine that its port has sent frames it kept
// (BackloggedPort): the QPs that waited for room go on. Safe from any
// goroutine.
func (d *Device) TxReady() { d.eng.kick() }

// drive runs rounds while work is flagged (pend) and the run lock is
// free, at most limit rounds in a row. It returns true when it stopped at
// the limit with work left (pend is set again: the caller wakes the
// engine goroutine); false when there is no work, or when another
// goroutine holds the lock, which then runs the flagged work.
func (e *engine) drive(limit int) bool {
	for e.pend.Load() {
		if !e.runMu.TryLock() {
			return false
		}
		if e.stopped {
			e.runMu.Unlock()
			return false
		}
		e.pend.Store(false)
		worked := true
		for n := 0; worked && n < limit; n++ {
			if worked = e.round(); worked {
				e.activity.Add(1)
			}
		}
		if !worked {
			e.notifyIdle()
		}
		e.runMu.Unlock()
		if worked {
			e.pend.Store(true)
			return true
		}
	}
	return false
}

// do runs fn on the engine goroutine and waits for it.
func (e *engine) do(fn func()) error {
	if e.d.closed.Load() {
		return ErrClosed
	}
	r := &ctlReq{fn: fn, done: make(chan struct{})}
	select {
	case e.ctl <- r:
	case <-e.done:
		return ErrClosed
	}
	<-r.done
	return nil
}

// waitIdle blocks until the engine has nothing to do: no queued frames,
// events or control requests and no QP able to send. Tests use it (with
// activity) to reach a quiescent state before advancing a fake clock.
func (e *engine) waitIdle() {
	ch := make(chan struct{})
	e.idleMu.Lock()
	e.idleWaiters = append(e.idleWaiters, ch)
	e.idleMu.Unlock()
	e.pend.Store(true) // a round must run to call notifyIdle
	e.wakeEngine()     // even in a HoldKick: its holder may be the waiter
	select {
	case <-ch:
	case <-e.done:
	}
}

func (e *engine) run() {
	defer close(e.done)
	// A safety net, not a clock: work whose producer's wake-up was
	// lost would otherwise wait for the next one. Idle ticks cost a
	// flag load (drive does nothing while pend is clear).
	tick := time.NewTicker(stallCheck)
	defer tick.Stop()
	for {
		select {
		case <-e.quit:
			e.stop()
			return
		default:
		}
		e.drive(math.MaxInt)
		select {
		case <-e.quit:
			e.stop()
			return
		case r := <-e.ctl:
			e.runMu.Lock()
			e.runCtl(r)
			e.activity.Add(1)
			e.runMu.Unlock()
			e.pend.Store(true) // what the request started
		case <-e.wake:
		case <-tick.C:
			e.check()
		}
	}
}

// check is the 10 ms safety net: work that is queued (frames, QP events)
// or flagged while no goroutine runs the engine or holds a HoldKick had
// its wake-up lost. It is counted (StallRecoveries; expect 0) and flagged
// for the drive that follows. A producer between setting pend and trying
// the lock can be counted once in a while; nothing else can.
func (e *engine) check() {
	if e.holds.Load() > 0 || len(e.wake) > 0 || !e.runMu.TryLock() {
		return // the holder, or the wake-up waiting, runs it
	}
	e.evMu.Lock()
	events := len(e.evList)
	e.evMu.Unlock()
	if e.pend.Load() || events > 0 || e.rx.len() > 0 {
		e.d.ctr.stallRecoveries.Add(1)
		e.pend.Store(true)
	}
	e.runMu.Unlock()
}

// round does one pass over every source of work and flushes the port's
// batch; runMu is held. It reports whether there was any.
func (e *engine) round() bool {
	worked := e.drainCtl()
	if e.drainEvents() {
		worked = true
	}
	if e.drainRx() {
		worked = true
	}
	if e.sendRound() {
		worked = true
	}
	if e.d.flushPort != nil {
		if err := e.d.flushPort.Flush(); err != nil {
			e.d.ctr.txErrors.Add(1)
		}
	}
	return worked
}

// stop shuts the engine down for good, excluding inline runners.
func (e *engine) stop() {
	e.runMu.Lock()
	e.stopped = true
	e.shutdown()
	e.runMu.Unlock()
}

func (e *engine) runCtl(r *ctlReq) {
	r.fn()
	close(r.done)
}

func (e *engine) drainCtl() bool {
	worked := false
	for {
		select {
		case r := <-e.ctl:
			e.runCtl(r)
			worked = true
		default:
			return worked
		}
	}
}

func (e *engine) notifyIdle() {
	e.idleMu.Lock()
	defer e.idleMu.Unlock()
	if len(e.idleWaiters) == 0 || e.rx.len() > 0 {
		return
	}
	e.evMu.Lock()
	n := len(e.evList)
	e.evMu.Unlock()
	if n > 0 {
		return
	}
	for _, ch := range e.idleWaiters {
		close(ch)
	}
	clear(e.idleWaiters)
	e.idleWaiters = e.idleWaiters[:0]
}

func (e *engine) drainEvents() bool {
	e.evMu.Lock()
	list := e.evList
	e.evList = e.evSpare[:0]
	e.evMu.Unlock()
	for _, qp := range list {
		ev := qp.events.Swap(0)
		if !qp.destroyed {
			qp.handleEvents(ev)
		}
	}
	clear(list)
	e.evSpare = list[:0]
	return len(list) > 0
}

// drainRx handles up to rxBatch frames (loopback first), then sends the
// coalesced ACKs of the batch. The buffers it is done with go back to the
// free list together.
func (e *engine) drainRx() bool {
	var done, in [rxBatch]*frameBuf
	n, nd := 0, 0
	for n < rxBatch && e.loopHead < len(e.loopQ) {
		b := e.loopQ[e.loopHead]
		e.loopQ[e.loopHead] = nil
		e.loopHead++
		if !e.rxFrame(b) {
			done[nd] = b
			nd++
		}
		n++
	}
	if n < rxBatch {
		k := e.rx.pop(in[:rxBatch-n])
		for i := range k {
			if !e.rxFrame(in[i]) {
				done[nd] = in[i]
				nd++
			}
		}
		n += k
	}
	if nd > 0 {
		e.rx.put(done[:nd]...)
	}
	if e.loopHead == len(e.loopQ) {
		e.loopQ = e.loopQ[:0]
		e.loopHead = 0
	}
	acks := e.flushAcks()
	return n > 0 || acks
}

// schedule puts qp on the send list if it is not there.
func (e *engine) schedule(qp *QP) {
	if !qp.inSendList && !qp.destroyed {
		qp.inSendList = true
		e.sendList = append(e.sendList, qp)
	}
}

// sendRound lets every QP on the send list send up to sendBudget packets.
// A QP that cannot go on (window full, nothing posted, waiting for an RNR
// timer, ...) leaves the list; the event that unblocks it puts it back.
func (e *engine) sendRound() bool {
	n := len(e.sendList)
	if n == 0 {
		return false
	}
	if p := e.d.backlog; p != nil && p.Backlog() >= maxPortBacklog {
		return false // the port's TxReady schedules the round again
	}
	sent := false
	j := 0
	for i := 0; i < n; i++ {
		qp := e.sendList[i]
		progressed, more := false, false
		if !qp.destroyed {
			// The responder's READ responses first (they answer
			// requests older than anything the requester sends now),
			// then the requester.
			rp, rmore := qp.replyStep(sendBudget)
			progressed, more = qp.reqStep(sendBudget)
			progressed, more = progressed || rp, more || rmore
		}
		sent = sent || progressed
		if more {
			e.sendList[j] = qp
			j++
		} else {
			qp.inSendList = false
		}
	}
	// QPs scheduled during the round were appended after n.
	m := copy(e.sendList[j:], e.sendList[n:])
	clear(e.sendList[j+m:])
	e.sendList = e.sendList[:j+m]
	if e.flushAcks() { // ACKs of requests taken from a backlog
		sent = true
	}
	return sent
}

func (e *engine) queueAck(qp *QP) {
	if !qp.inAckList {
		qp.inAckList = true
		e.ackList = append(e.ackList, qp)
	}
}

func (e *engine) flushAcks() bool {
	if len(e.ackList) == 0 {
		return false
	}
	for _, qp := range e.ackList {
		qp.inAckList = false
		if qp.resp.ackPending && !qp.destroyed {
			qp.resp.ackPending = false
			qp.sendAck(qp.resp.ackPSN, proto.MakeSyndrome(proto.AckTypeACK, proto.AETHCreditInvalid))
			e.d.ctr.acksSent.Add(1)
		}
	}
	clear(e.ackList)
	e.ackList = e.ackList[:0]
	return true
}

// rxFrame validates one frame and hands its packet to the QP. Every reason
// to drop is counted; nothing is logged. It reports whether it kept b (a
// request parked on a QP that is busy answering a READ); otherwise the
// caller recycles it.
func (e *engine) rxFrame(b *frameBuf) bool {
	d := e.d
	frame := b.b[:b.n]
	if b.raw {
		e.rxRaw(frame)
		return false
	}
	if d.ib() {
		return e.rxFrameIB(b)
	}
	pkt, err := proto.Parse(frame, proto.LinkEthernet)
	if err != nil {
		d.ctr.rxMalformed.Add(1)
		return false
	}
	if pkt.Type != proto.FrameRoCEv2 {
		if pkt.Type == proto.FrameOther || pkt.Type == proto.FrameMACControl {
			d.ctr.rxNotRoCE.Add(1)
		} else {
			d.ctr.rxMalformed.Add(1)
		}
		return false
	}
	// Unicast to our MAC and one of our IPs, or multicast to a group
	// (a UD datagram; which QPs get it is decided below).
	mcast := pkt.Eth.Dst()[0]&1 != 0
	if !mcast && !bytes.Equal(pkt.Eth.Dst(), d.cfg.MAC[:]) {
		d.ctr.rxNotForUs.Add(1)
		return false
	}
	if pkt.IPv4 != nil && !pkt.IPv4.IsChecksumValid() {
		d.ctr.rxMalformed.Add(1)
		return false
	}
	var group [16]byte
	switch {
	case mcast:
		group = multicastGroup(&pkt)
		if !isMcastGID(group) || mcastMAC(group) != [6]byte(pkt.Eth.Dst()) {
			d.ctr.rxNotForUs.Add(1)
			return false
		}
	case pkt.IPv4 != nil:
		if !d.ownsIPv4(pkt.IPv4.Dst()) {
			d.ctr.rxNotForUs.Add(1)
			return false
		}
	default:
		if !d.ownsGID(pkt.IPv6.Dst()) {
			d.ctr.rxNotForUs.Add(1)
			return false
		}
	}
	if !pkt.ICRCValid() {
		d.ctr.rxICRC.Add(1)
		return false
	}
	if d.pkeyIndex(pkt.BTH.PKey()) < 0 {
		d.ctr.rxPKey.Add(1)
		return false
	}
	return e.dispatch(b, &pkt, frame, mcast, group, mcast && d.fromUs(&pkt))
}

// dispatch hands a validated packet (RoCEv2 or IB data) to its QP, or to
// every QP of a multicast group. It reports whether it kept b.
func (e *engine) dispatch(b *frameBuf, pkt *proto.Packet, frame []byte, mcast bool, group [16]byte, fromUs bool) bool {
	d := e.d
	bth := pkt.BTH
	op := bth.Opcode()
	switch tr := op.Transport(); {
	case tr == proto.TransportUD:
		d.ctr.rxPackets.Add(1)
		d.ctr.rxBytes.Add(uint64(len(frame)))
		if mcast {
			if bth.DestQP() != mcastQPN {
				d.ctr.rxMalformed.Add(1)
				return false
			}
			e.rxUD(pkt, &group, fromUs)
		} else {
			e.rxUD(pkt, nil, false)
		}
		return false
	case tr == proto.TransportUC && !mcast:
		if qp := e.qps[bth.DestQP()]; qp != nil && qp.takes(op) {
			if !qp.fromPeer(pkt) {
				d.ctr.rxAddrMismatch.Add(1)
				return false
			}
			d.ctr.rxPackets.Add(1)
			d.ctr.rxBytes.Add(uint64(len(frame)))
			qp.onRequest(pkt)
		} else if qp == nil {
			d.ctr.rxUnknownQP.Add(1)
		} else {
			d.ctr.rxUnsupported.Add(1)
		}
		return false
	case tr == proto.TransportCNP && !mcast:
		if qp := e.qps[bth.DestQP()]; qp != nil && (qp.init.QPType == QPTypeRC || qp.init.QPType == QPTypeXRCIni) {
			if !qp.fromPeer(pkt) {
				d.ctr.rxAddrMismatch.Add(1)
				return false
			}
			d.ctr.rxPackets.Add(1)
			d.ctr.rxBytes.Add(uint64(len(frame)))
			qp.onCNP()
		} else {
			d.ctr.rxUnknownQP.Add(1)
		}
		return false
	case mcast || (tr != proto.TransportRC && tr != proto.TransportXRC):
		d.ctr.rxUnsupported.Add(1)
		return false
	}
	qp := e.qps[bth.DestQP()]
	if qp == nil {
		d.ctr.rxUnknownQP.Add(1)
		return false
	}
	if !qp.takes(op) {
		d.ctr.rxUnsupported.Add(1)
		return false
	}
	if !qp.fromPeer(pkt) {
		d.ctr.rxAddrMismatch.Add(1)
		return false
	}
	d.ctr.rxPackets.Add(1)
	d.ctr.rxBytes.Add(uint64(len(frame)))
	if isCE(pkt) {
		qp.onCE()
	}
	switch op.Info().Kind {
	case proto.KindSend, proto.KindWrite, proto.KindReadRequest, proto.KindAtomic, proto.KindAtomicWrite:
		if qp.resp.reply != nil || qp.backHead < len(qp.backlog) {
			// The responder is still sending READ responses: requests
			// wait, in order, as in rxe's per-QP request queue. A
			// requester keeps at most MaxUnackedPSNs packets in flight,
			// so a conforming peer never parks more than that; beyond
			// it (retransmitted copies, or a peer ignoring the window)
			// drop, which bounds the frames one QP can hold.
			if len(qp.backlog)-qp.backHead >= MaxUnackedPSNs {
				d.ctr.rxDropped.Add(1)
				return false
			}
			qp.backlog = append(qp.backlog, b)
			e.schedule(qp)
			return true
		}
		qp.onRequest(pkt)
	case proto.KindAck, proto.KindReadResponse, proto.KindAtomicAck:
		qp.onResponse(pkt)
	default:
		d.ctr.rxUnsupported.Add(1)
	}
	return false
}

// fromPeer reports whether a packet of a connected QP (RC, UC) comes
// from the QP's remote address to its local one: the IP source is the
// path's destination and the IP destination its source, as rxe's
// check_addr requires. Anyone on the fabric can otherwise write into
// the QP's MRs by guessing a QPN, a PSN and an R_Key; a QP that has no
// path yet (before RTR) accepts no one. On InfiniBand the address is the
// LID: the SLID must be the path's DLID (IBA 9.6.1.5: the responder
// validates the source LID of a connected QP's packets against the QP's
// path; alternate paths are refused at modify, so there is one), and
// when both the packet and the path have a GRH, the SGID the path's DGID.
// RoCEv1 checks the SGID alike.
func (qp *QP) fromPeer(pkt *proto.Packet) bool {
	f := &qp.path.f
	switch {
	case pkt.LRH != nil:
		if pkt.LRH.SLID() != f.LRH.DLID || f.Link != proto.LinkIB {
			return false
		}
		return pkt.GRH == nil || !f.Global || [16]byte(pkt.GRH.SGID()) == f.GRH.DGID
	case pkt.GRH != nil:
		return f.RoCEv1 && [16]byte(pkt.GRH.SGID()) == f.GRH.DGID
	case pkt.IPv4 != nil:
		return !f.IPv6 && [4]byte(pkt.IPv4.Src()) == f.IP4.Dst && [4]byte(pkt.IPv4.Dst()) == f.IP4.Src
	case pkt.IPv6 != nil:
		return f.IPv6 && [16]byte(pkt.IPv6.Src()) == f.IP6.Dst && [16]byte(pkt.IPv6.Dst()) == f.IP6.Src
	}
	return true
}

func (d *Device) ownsIPv4(ip []byte) bool {
	for _, a := range d.addrs.Load().ipv4 {
		if bytes.Equal(a[:], ip) {
			return true
		}
	}
	return false
}

func (d *Device) ownsGID(ip []byte) bool {
	for _, g := range d.gidTable() {
		if bytes.Equal(g[:], ip) {
			return true
		}
	}
	return false
}

// shutdown runs when Close stops the engine: every QP goes to ERR (posted
// work completes with WRFlushErr) and timers stop.
func (e *engine) shutdown() {
	for _, qp := range e.qps {
		qp.enterError()
		qp.stopTimers()
	}
}

// WaitIdle blocks until the engine has nothing left to do: no queued frames,
// events or control requests and no QP able to send (QPs may still wait
// for a timer). It is for tests and deterministic harnesses driving the
// device with a fake clock; see rdmatest.Settle. After Close it returns at
// once.
func (d *Device) WaitIdle() { d.eng.waitIdle() }
