package decode_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/PacketFive/hinic/internal/cli/proto/decode"
	"github.com/PacketFive/hinic/internal/proto"
)

// ibFrames returns a native IB RC WRITE (local) and a UD SEND with GRH.
func ibFrames(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, f := range []proto.PacketFields{
		{Link: proto.LinkIB, LRH: proto.LRHFields{SL: 2, DLID: 7, SLID: 3},
			BTH:     proto.BTHFields{Opcode: proto.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 0x42, AckReq: true, PSN: 9},
			RETH:    proto.RETHFields{VA: 0x1000, RKey: 0x77, DMALength: 5},
			Payload: []byte("hello")},
		{Link: proto.LinkIB, Global: true, LRH: proto.LRHFields{DLID: 8, SLID: 3},
			GRH:     proto.GRHFields{HopLmt: 1, SGID: [16]byte{0xfe, 0x80, 15: 3}, DGID: [16]byte{0xfe, 0x80, 15: 8}},
			BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 1, PSN: 1},
			DETH:    proto.DETHFields{QKey: 0x80010000, SrcQP: 1},
			Payload: make([]byte, 256)},
	} {
		buf := make([]byte, f.Len())
		if _, err := f.Encode(buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf)
	}
	return out
}

func writeCapture(t *testing.T, ng bool, lt layers.LinkType, frames [][]byte) string {
	t.Helper()
	data := decode.CaptureBytes(t, ng, lt, frames...)
	path := filepath.Join(t.TempDir(), "c.cap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// erfRecord wraps an IB packet in an ERF record of type InfiniBand (21).
func erfRecord(pkt []byte) []byte {
	rec := make([]byte, 16+len(pkt))
	rec[8] = 21
	binary.BigEndian.PutUint16(rec[10:], uint16(len(rec)))
	binary.BigEndian.PutUint16(rec[14:], uint16(len(pkt)))
	copy(rec[16:], pkt)
	return rec
}

func TestNativeIBCaptures(t *testing.T) {
	frames := ibFrames(t)
	erf := [][]byte{erfRecord(frames[0]), erfRecord(frames[1])}
	for _, tc := range []struct {
		name   string
		ng     bool
		lt     layers.LinkType
		frames [][]byte
	}{
		{"pcap user0", false, 147, frames},
		{"pcap infiniband", false, 247, frames},
		{"pcapng user0", true, 147, frames},
		{"pcap erf", false, 197, erf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := decodeJSON(t, writeCapture(t, tc.ng, tc.lt, tc.frames))
			if len(rows) != 2 {
				t.Fatalf("%d rows", len(rows))
			}
			for i, r := range rows {
				if r["link"] != "ib" || r["icrc_ok"] != true || r["vcrc_ok"] != true || r["error"] != nil {
					t.Errorf("row %d: %v", i+1, r)
				}
			}
			if rows[0]["opcode"] != "RC_RDMA_WRITE_ONLY" || rows[0]["lrh"].(map[string]any)["dlid"] != 7.0 {
				t.Errorf("row 1: %v", rows[0])
			}
			if rows[1]["opcode"] != "UD_SEND_ONLY" || rows[1]["grh"] == nil || rows[1]["deth"] == nil {
				t.Errorf("row 2: %v", rows[1])
			}
		})
	}
}

func TestPcapngEthernet(t *testing.T) {
	f := proto.PacketFields{BTH: proto.BTHFields{Opcode: proto.OpRCSendOnly, PKey: 0xFFFF, DestQP: 5}, Payload: []byte{1, 2, 3}}
	buf := make([]byte, f.Len())
	if _, err := f.Encode(buf); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "", "proto", "decode", "-o", "json", writeCapture(t, true, layers.LinkTypeEthernet, [][]byte{buf}))
	if code != 0 || !strings.Contains(out, `"icrc_ok":true`) || !strings.Contains(out, `"pad":1`) {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

func TestUnsupportedLinkType(t *testing.T) {
	path := writeCapture(t, false, layers.LinkTypeLinuxSLL, [][]byte{{1, 2, 3}})
	_, errOut, code := run(t, "", "proto", "decode", path)
	if code != 1 || !strings.Contains(errOut, "neither Ethernet, InfiniBand nor HiLink") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestDirectedRouteSMP decodes an OpenSM-style DR SMP (Get NodeInfo, two
// hops) carried on VL15 to QP0.
func TestDirectedRouteSMP(t *testing.T) {
	mad := make([]byte, proto.MADSize)
	proto.SMP(mad).Encode(&proto.SMPFields{
		MgmtClass: proto.MgmtClassSubnDirectedRoute, ClassVersion: 1, Method: proto.MADMethodGet,
		TransactionID: 0x1234, AttributeID: proto.SMPAttrNodeInfo, HopPointer: 1, HopCount: 2,
		DrSLID: proto.LIDPermissive, DrDLID: proto.LIDPermissive,
	})
	proto.SMP(mad).InitialPath()[1], proto.SMP(mad).InitialPath()[2] = 1, 3
	f := proto.PacketFields{Link: proto.LinkIB, LRH: proto.LRHFields{VL: proto.VL15, DLID: proto.LIDPermissive, SLID: proto.LIDPermissive},
		BTH: proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 0}, DETH: proto.DETHFields{SrcQP: 0}, Payload: mad}
	buf := make([]byte, f.Len())
	if _, err := f.Encode(buf); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "", "proto", "decode", "--link", "ib", "-o", "json", "--hex", hexString(buf))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		MAD map[string]float64 `json:"mad"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"class": 0x81, "method": 1, "attr_id": 0x11, "attr_mod": 0, "tid": 0x1234,
		"status": 0, "hop_ptr": 1, "hop_count": 2, "direction": 0}
	for k, v := range want {
		if r.MAD[k] != v {
			t.Errorf("mad.%s = %v, want %v (%s)", k, r.MAD[k], v, out)
		}
	}
}

func hexString(b []byte) string {
	const h = "0123456789abcdef"
	s := make([]byte, 0, 2*len(b))
	for _, x := range b {
		s = append(s, h[x>>4], h[x&15])
	}
	return string(s)
}
