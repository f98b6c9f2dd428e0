package testutil

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Tshark returns the path of tshark, skipping the test when it is missing
// (failing it under HINIC_REQUIRE_TOOLS=1, as RequireTool does).
func Tshark(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("tshark")
	RequireTool(t, "tshark", "apt-get install tshark", err == nil)
	return path
}

// RunTshark runs tshark with args and returns what it printed; a failure
// fails t with tshark's stderr.
func RunTshark(t testing.TB, tshark string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TsharkArgs turn off heuristic dissectors that claim RDMA payloads (RPC
// over RDMA, Mellanox EoIB, and eth_over_ib, which reads the first two
// bytes of any RC payload as an EtherType: a 2-byte ib_write_lat WRITE
// of 00 61 became a malformed compressed-RTP header), accept the zero
// UDP checksum of RoCEv2 over IPv6 (RFC 6935, as rdma_rxe sends it: the
// ICRC covers the packet; tshark otherwise flags every IPv6 RoCEv2
// packet, such as ud_multicast's, as an error) and teach tshark that
// user link type 147 is native InfiniBand (tshark 4.0 does not know
// LINKTYPE_INFINIBAND 247).
var TsharkArgs = []string{
	"--disable-protocol", "rpcordma", "--disable-protocol", "infiniband.eoib", "--disable-heuristic", "eth_over_ib",
	"-o", "udp.ignore_ipv6_zero_checksum:TRUE",
	"-o", `uat:user_dlts:"User 0 (DLT=147)","infiniband","0","","0",""`,
}

// Link types of the captures tests write.
const (
	LinkTypeEthernet = 1
	LinkTypeUser0    = 147 // native IB, read with TsharkArgs
)

// WritePcap writes frames as a classic little-endian pcap file with link
// type lt, one second apart.
func WritePcap(t testing.TB, path string, lt uint32, frames [][]byte) {
	t.Helper()
	var b bytes.Buffer
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xA1B2C3D4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], lt)
	b.Write(hdr)
	for i, f := range frames {
		rec := make([]byte, 16)
		binary.LittleEndian.PutUint32(rec[0:], uint32(1700000000+i))
		binary.LittleEndian.PutUint32(rec[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(rec[12:], uint32(len(f)))
		b.Write(rec)
		b.Write(f)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
