package rdma_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/testutil"
)

// TestSessionDissectsInTshark captures every frame of a session with each
// operation, an RNR NAK and a PSN-sequence NAK, in IPv4 and IPv6, and has
// Debian's tshark dissect them: no malformed frame, and tshark reads the
// opcode, destination QP, PSN and AETH syndrome our parser reads. Skipped
// without tshark unless HINIC_REQUIRE_TOOLS=1.
func TestSessionDissectsInTshark(t *testing.T) {
	tshark := testutil.Tshark(t)
	var frames [][]byte
	for _, v6 := range []bool{false, true} {
		p, ia, ib := newInterceptPair(t, pairOpts{ipv6: v6, mtu: 1024})
		ia.keep, ib.keep = true, true
		// An RNR NAK (no receive yet), then a dropped packet (sequence NAK).
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SGList: p.a.sge(0, 100)}}))
		p.settle()
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0, 8192)}, {WRID: 2, SGList: p.b.sge(0, 8192)},
			{WRID: 3, SGList: p.b.sge(0, 8192)}}))
		ia.setDrop(dropNth(3, isData))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{
			{WRID: 2, Opcode: rdma.WRSendWithImm, ImmData: 0x1234, SGList: p.a.sge(0, 3000)},
			{WRID: 3, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 2500), RemoteAddr: 0x4000, RKey: p.b.mr.RKey},
			{WRID: 4, Opcode: rdma.WRRDMAWriteWithImm, SGList: p.a.sge(0, 10), RemoteAddr: 0x4000, RKey: p.b.mr.RKey},
			{WRID: 5, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, 2100), RemoteAddr: 0x4000, RKey: p.b.mr.RKey},
		}))
		wantWC(t, p.poll(p.a.scq, 1)[0], 5, rdma.WCSuccess, rdma.WCRDMARead)
		frames = append(frames, ia.captured()...)
		frames = append(frames, ib.captured()...)
	}
	path := filepath.Join(t.TempDir(), "session.pcap")
	testutil.WritePcap(t, path, testutil.LinkTypeEthernet, frames)
	run := func(args ...string) string {
		args = append(append(append([]string{}, testutil.TsharkArgs...), "-r", path), args...)
		out, err := exec.Command(tshark, args...).Output()
		if err != nil {
			t.Fatalf("tshark %v: %v", args, err)
		}
		return string(out)
	}
	// tshark flags the zero UDP checksum of IPv6 frames as an error (RFC
	// 8200); RoCEv2 senders, rxe included, send zero and receivers do not
	// check it (RFC 6935/6936 zero-checksum mode), so that one is allowed.
	v := strings.ReplaceAll(run("-V"), "[Expert Info (Error/Checksum): Illegal checksum value (0)]", "")
	if i := strings.Index(v, "Malformed"); i >= 0 {
		t.Fatalf("tshark reports a malformed frame:\n%s", v[max(0, i-3000):min(len(v), i+200)])
	}
	if i := strings.Index(v, "Expert Info (Error"); i >= 0 {
		t.Fatalf("tshark reports an error:\n%s", v[max(0, i-3000):min(len(v), i+200)])
	}
	rows := strings.Split(strings.TrimSpace(run("-T", "fields", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
		"-e", "infiniband.bth.psn", "-e", "infiniband.aeth.syndrome", "-e", "udp.dstport")), "\n")
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
	}
	seen := map[proto.Opcode]bool{}
	var rnr, seqNAK bool
	for i, row := range rows {
		pkt, err := proto.Parse(frames[i], proto.LinkEthernet)
		if err != nil || !pkt.ICRCValid() {
			t.Fatalf("frame %d: %v", i, err)
		}
		op := pkt.BTH.Opcode()
		seen[op] = true
		want := fmt.Sprintf("%d\t0x%06x\t%d\t", op, pkt.BTH.DestQP(), pkt.BTH.PSN())
		if pkt.AETH != nil {
			want += fmt.Sprintf("%d", pkt.AETH.Syndrome())
			rnr = rnr || pkt.AETH.Type() == proto.AckTypeRNRNAK
			seqNAK = seqNAK || (pkt.AETH.Type() == proto.AckTypeNAK && pkt.AETH.Value() == proto.NAKPSNSequenceError)
		}
		if want += "\t4791"; row != want {
			t.Errorf("frame %d (%v): tshark %q, want %q", i, op, row, want)
		}
	}
	for _, op := range []proto.Opcode{proto.OpRCSendOnly, proto.OpRCSendFirst, proto.OpRCSendLastImm, proto.OpRCWriteFirst,
		proto.OpRCWriteLast, proto.OpRCWriteOnlyImm, proto.OpRCReadRequest, proto.OpRCReadResponseFirst,
		proto.OpRCReadResponseLast, proto.OpRCAcknowledge} {
		if !seen[op] {
			t.Errorf("no %v in the session", op)
		}
	}
	if !rnr || !seqNAK {
		t.Errorf("RNR NAK seen %v, sequence NAK seen %v", rnr, seqNAK)
	}
}
