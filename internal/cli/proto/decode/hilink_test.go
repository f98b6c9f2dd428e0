package decode_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// hilinkFrames returns a write (last frame, returning one credit), its
// response, a read request, a credit, and three bad messages: a short
// one, one of version 2 and a credit with a payload.
func hilinkFrames() [][]byte {
	write := wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, Flags: wire.FlagLast, Credits: 1, SrcGPU: 0,
		DstGPU: 1, Tag: 77, Address: 0x1000}, []byte("payload!"))
	resp := wire.Append(nil, &wire.Fields{Type: wire.TypeWriteResp, SrcGPU: 1, DstGPU: 0, Tag: 77, Length: 8}, nil)
	read := wire.Append(nil, &wire.Fields{Type: wire.TypeReadReq, SrcGPU: 0, DstGPU: 1, Tag: 78, Length: 4096,
		Address: 0x2000}, nil)
	credit := wire.Append(nil, &wire.Fields{Type: wire.TypeCredit, Credits: 3}, nil)
	v2 := append([]byte(nil), read...)
	v2[0] = 2<<4 | byte(wire.TypeReadReq)
	fat := append(append([]byte(nil), credit...), 0)
	return [][]byte{write, resp, read, credit, write[:10], v2, fat}
}

// decodeJSON runs `hinic proto decode -o json` with args, which must
// succeed, and returns its records.
func decodeJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, errOut, code := run(t, "", append([]string{"proto", "decode", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestHiLinkCapture: a capture of HiLink's link type (148) is decoded as
// HiLink messages, bad ones with their error and whatever header they
// hold.
func TestHiLinkCapture(t *testing.T) {
	for _, ng := range []bool{false, true} {
		path := writeCapture(t, ng, 148, hilinkFrames())
		rows := decodeJSON(t, path)
		if len(rows) != 7 {
			t.Fatalf("%d rows", len(rows))
		}
		for i, want := range []struct {
			typ, err string
			header   bool
		}{
			{"write", "", true}, {"write-resp", "", true}, {"read-req", "", true}, {"credit", "", true},
			{"", "truncated", false}, {"read-req", "unsupported version", true}, {"credit", "malformed", true},
		} {
			r := rows[i]
			h, _ := r["hilink"].(map[string]any)
			errStr, _ := r["error"].(string)
			if r["link"] != "hilink" || errStr != want.err || (h != nil) != want.header || r["icrc_ok"] != nil {
				t.Errorf("pcapng %v, row %d: %v", ng, i+1, r)
				continue
			}
			if h != nil && (h["type"] != want.typ || r["opcode"] != want.typ) {
				t.Errorf("pcapng %v, row %d: type %v, opcode %v, want %s", ng, i+1, h["type"], r["opcode"], want.typ)
			}
		}
		w := rows[0]["hilink"].(map[string]any)
		if w["last"] != true || w["credits"] != 1.0 || w["dst_gpu"] != 1.0 || w["tag"] != 77.0 || w["length"] != 8.0 ||
			w["address"] != float64(0x1000) || rows[0]["payload_len"] != 8.0 || w["version"] != 1.0 {
			t.Errorf("write: %v", rows[0])
		}
		if v := rows[5]["hilink"].(map[string]any)["version"]; v != 2.0 {
			t.Errorf("version-2 message: version %v", v)
		}
	}
}

// TestHiLinkTable: the table's DETAIL shows the fields each type uses,
// and --check-icrc counts HiLink messages apart from RoCE/IB frames.
func TestHiLinkTable(t *testing.T) {
	path := writeCapture(t, false, 148, hilinkFrames()[:4])
	out, errOut, code := run(t, "", "proto", "decode", "--check-icrc", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, want := range []string{
		"gpu 0->1 tag=77 addr=0x1000 len=8 last credits=1",
		"gpu 1->0 tag=77 len=8",
		"gpu 0->1 tag=78 addr=0x2000 len=4096",
		"credits=3",
	} {
		if i+1 >= len(lines) || !strings.HasSuffix(strings.TrimSpace(lines[i+1]), want) ||
			!strings.Contains(lines[i+1], "hilink") {
			t.Errorf("row %d does not end with %q:\n%s", i+1, want, out)
		}
	}
	if !strings.Contains(errOut, "0 RoCE/IB transport frames, 0 with a bad ICRC or VCRC, 4 HiLink messages (no ICRC), 0 malformed") {
		t.Errorf("summary: %s", errOut)
	}
}

// TestLinkOverride: --link replaces a capture's user link type, in both
// directions, and a hex frame can be HiLink; Ethernet captures keep
// theirs.
func TestLinkOverride(t *testing.T) {
	ib := ibFrames(t)
	if r := decodeJSON(t, "--link", "ib", writeCapture(t, false, 148, ib))[0]; r["link"] != "ib" || r["icrc_ok"] != true {
		t.Errorf("IB capture of link type 148 with --link ib: %v", r)
	}
	if r := decodeJSON(t, "--link", "ib", writeCapture(t, true, 148, ib))[0]; r["link"] != "ib" || r["icrc_ok"] != true {
		t.Errorf("pcapng IB capture of link type 148 with --link ib: %v", r)
	}
	hl := hilinkFrames()
	if r := decodeJSON(t, "--link", "hilink", writeCapture(t, false, 147, hl[:1]))[0]; r["link"] != "hilink" || r["error"] != nil {
		t.Errorf("HiLink capture of link type 147 with --link hilink: %v", r)
	}
	if r := decodeJSON(t, "--link", "hilink", "--hex", hexString(hl[3]))[0]; r["opcode"] != "credit" {
		t.Errorf("hex HiLink credit: %v", r)
	}
	if r := decodeJSON(t, "--link", "hilink", writeCapture(t, false, layers.LinkTypeEthernet, [][]byte{make([]byte, 60)}))[0]; r["link"] == "hilink" {
		t.Errorf("an Ethernet capture decoded as HiLink: %v", r)
	}
	if _, errOut, code := run(t, "", "proto", "decode", "--link", "nvlink", "--hex", "00"); code != 2 ||
		!strings.Contains(errOut, "valid values are ethernet, ib, hilink") {
		t.Errorf("--link nvlink: exit %d: %s", code, errOut)
	}
}
