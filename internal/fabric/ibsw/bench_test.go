package ibsw

import (
	"fmt"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
)

// TestUnicastDoesNotAllocate: the unicast data path allocates nothing.
func TestUnicastDoesNotAllocate(t *testing.T) {
	s := forwardingSwitch(t)
	pkt := dataPacket(2, 1, 0, 0, 0xFFFF, 4096)
	n := 0
	emit := func(int, []byte) { n++ }
	allocs := testing.AllocsPerRun(100, func() { s.Ingress(1, pkt, emit) })
	if allocs != 0 || n == 0 {
		t.Errorf("%v allocations per unicast packet (%d sent)", allocs, n)
	}
}

// BenchmarkIngress measures the relay against the raw ceilings of the same
// run: computing one VCRC over the packet (the least a switch must do) and
// copying it. Compare ns/op of unicast with ceiling-vcrc; benchstat over
// -count=10 for changes.
func BenchmarkIngress(b *testing.B) {
	for _, size := range []int{256, 4096} {
		pkt := dataPacket(2, 1, 0, 0, 0xFFFF, size)
		emit := func(int, []byte) {}

		b.Run(fmt.Sprintf("unicast/size=%d", size), func(b *testing.B) {
			s := forwardingSwitch(b)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				s.Ingress(1, pkt, emit)
			}
			if s.Snapshot().Ports[2].Counters.XmitPkts == 0 {
				b.Fatal("nothing forwarded")
			}
		})

		// SL 3 on VL 0: the VL is rewritten and the VCRC recomputed
		// on every packet. Each iteration restores the original, so
		// this includes one copy.
		vl := dataPacket(2, 1, 3, 0, 0xFFFF, size)
		work := make([]byte, len(vl))
		b.Run(fmt.Sprintf("unicast-vl-rewrite/size=%d", size), func(b *testing.B) {
			s := forwardingSwitch(b)
			b.SetBytes(int64(len(vl)))
			b.ReportAllocs()
			for b.Loop() {
				copy(work, vl)
				s.Ingress(1, work, emit)
			}
		})

		b.Run(fmt.Sprintf("ceiling-vcrc/size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(len(pkt)))
			var sink uint16
			for b.Loop() {
				sink ^= proto.VCRC(pkt[:len(pkt)-proto.VCRCSize])
			}
			_ = sink
		})

		b.Run(fmt.Sprintf("ceiling-memcpy/size=%d", size), func(b *testing.B) {
			dst := make([]byte, len(pkt))
			b.SetBytes(int64(len(pkt)))
			for b.Loop() {
				copy(dst, pkt)
			}
		})
	}

	// Management: a directed-route SMP passing through (rewritten, new
	// ICRC and VCRC) and one the SMA answers.
	relay := drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrNodeInfo, hc: 3, hp: 1, initial: []byte{1, 2, 1}})
	answer := drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrPortInfo, am: 2, hc: 1, hp: 1, initial: []byte{1}})
	for _, c := range []struct {
		name string
		pkt  []byte
	}{{"dr-relay", relay}, {"sma-get-portinfo", answer}} {
		b.Run(c.name, func(b *testing.B) {
			s := forwardingSwitch(b)
			work := make([]byte, len(c.pkt))
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				copy(work, c.pkt)
				s.Ingress(1, work, func(int, []byte) { n++ })
			}
			if n == 0 {
				b.Fatal("nothing sent")
			}
		})
	}
}
