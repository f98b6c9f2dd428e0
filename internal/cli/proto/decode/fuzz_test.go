package decode

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/hilink/wire"
	"github.com/PacketFive/hinic/internal/proto"
)

// CaptureBytes is a pcap (or pcapng) file of frames with link type lt,
// for this package's tests and decode_test's.
func CaptureBytes(f testing.TB, ng bool, lt layers.LinkType, frames ...[]byte) []byte {
	f.Helper()
	var b bytes.Buffer
	ci := func(n int) gopacket.CaptureInfo {
		return gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: n, Length: n}
	}
	if ng {
		w, err := pcapgo.NewNgWriter(&b, lt)
		if err != nil {
			f.Fatal(err)
		}
		for _, fr := range frames {
			if err := w.WritePacket(ci(len(fr)), fr); err != nil {
				f.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	w := pcapgo.NewWriter(&b)
	if err := w.WriteFileHeader(65535, lt); err != nil {
		f.Fatal(err)
	}
	for _, fr := range frames {
		if err := w.WritePacket(ci(len(fr)), fr); err != nil {
			f.Fatal(err)
		}
	}
	return b.Bytes()
}

// FuzzDecodeInput feeds arbitrary bytes to `hinic proto decode` as its
// input file: pcap (both byte orders, ERF records, HiLink's link type),
// pcapng, or hex lines, read as each --link would.
// Property: no panic and no runaway; every record is described.
func FuzzDecodeInput(f *testing.F) {
	ib := proto.PacketFields{Link: proto.LinkIB, LRH: proto.LRHFields{SL: 2, DLID: 7, SLID: 3},
		BTH:     proto.BTHFields{Opcode: proto.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 0x42, AckReq: true, PSN: 9},
		RETH:    proto.RETHFields{VA: 0x1000, RKey: 0x77, DMALength: 5},
		Payload: []byte("hello")}
	ibPkt := make([]byte, ib.Len())
	if _, err := ib.Encode(ibPkt); err != nil {
		f.Fatal(err)
	}
	// An ERF record of type InfiniBand with one extension header.
	erf := append([]byte{0, 0, 0, 0, 0, 0, 0, 0, erfTypeInfiniBand | 0x80, 0, 0, 0, 0, 0, 0, 0,
		0x01, 0, 0, 0, 0, 0, 0, 0}, ibPkt...)
	if golden, err := os.ReadFile("../../../../testdata/rocev2-golden.pcap"); err == nil {
		f.Add(golden)
	}
	f.Add(CaptureBytes(f, false, layers.LinkTypeEthernet, make([]byte, 60)))
	f.Add(CaptureBytes(f, false, layers.LinkType(linkTypeUser0), ibPkt))
	f.Add(CaptureBytes(f, false, layers.LinkType(linkTypeERF), erf))
	f.Add(CaptureBytes(f, true, layers.LinkType(linkTypeInfiniBand), ibPkt))
	f.Add(CaptureBytes(f, true, layers.LinkType(linkTypeERF), erf))
	f.Add([]byte("0x00112233445566778899aabb0800 # a comment\n\nzz\n"))
	write := wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, Flags: wire.FlagLast, Credits: 1, DstGPU: 1,
		Tag: 7, Address: 0x1000}, []byte("payload!"))
	f.Add(CaptureBytes(f, false, layers.LinkType(linkTypeHiLink), write, write[:20]))
	f.Add(CaptureBytes(f, true, layers.LinkType(linkTypeHiLink), write))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, o := range []Options{{Link: "ethernet"}, {Link: "ib"}, {Link: "hilink", LinkSet: true}} {
			o.IO = &cmdutil.IOStreams{In: bytes.NewReader(data)}
			src, err := openSource(&o)
			if err != nil {
				continue
			}
			// A record is at least a header's bytes, so len(data) bounds
			// the records; hex lines can be shorter, so allow one a byte.
			for i := 0; i <= len(data); i++ {
				frame, lt, err := src.next()
				if err != nil {
					break
				}
				r := Describe(i, frame, lt)
				_ = r.summary()
				_ = r.row()
			}
		}
	})
}
