// Package capture checks captures of a link between two network
// namespaces (testutil.NetnsPair): tshark on the veth, VXLAN and
// IB-over-UDP datagrams with valid RoCEv2 and IB inside. It sits above
// testutil because it imports proto, whose own tests use testutil.
package capture

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/testutil"
)

// CaptureIn runs tshark on device dev inside network namespace ns,
// writing the UDP datagrams it sees to file, until stop (or the test's
// end).
func CaptureIn(t testing.TB, tshark, ns, dev, file string) (stop func()) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, tshark, "-i", dev, "-f", "udp", "-w", file)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "Capturing on") {
				close(started)
				once = true
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("tshark did not start capturing")
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// CheckVXLANCapture has tshark dissect a capture of CaptureIn: VXLAN with
// VNI vni carrying RoCEv2 both ways, from the inner IPv4 source
// addresses src (inner IPv6 RoCEv2, such as multicast to an ff0e:: GID,
// is counted by its own source), and nothing malformed; then it checks
// every inner frame's ICRC.
// It returns how many VXLAN datagrams carried RoCEv2.
func CheckVXLANCapture(t testing.TB, tshark, pcap string, vni int, src [2]string) int {
	t.Helper()
	run := tsharkClean(t, tshark, pcap)
	rows := strings.Split(strings.TrimSpace(run("-r", pcap, "-Y", "vxlan && infiniband", "-T", "fields",
		"-e", "udp.dstport", "-e", "vxlan.vni", "-e", "ip.src", "-e", "ipv6.src", "-e", "infiniband.bth.opcode")), "\n")
	dirs := map[string]int{}
	for _, row := range rows {
		col := strings.Split(row, "\t")
		if len(col) != 5 || !strings.HasPrefix(col[0], "4789") || col[1] != strconv.Itoa(vni) {
			t.Fatalf("tshark row %q: want UDP 4789 and VNI %d", row, vni)
		}
		// ip.src lists the outer source, then an inner IPv4 one; an
		// inner IPv6 header's is ipv6.src.
		srcs := strings.Split(col[2], ",")
		switch {
		case len(srcs) == 2 && col[3] == "":
			dirs[srcs[1]]++
		case len(srcs) == 1 && col[3] != "" && !strings.Contains(col[3], ","):
			dirs[col[3]]++
		default:
			t.Fatalf("tshark row %q: want an outer IPv4 header and one inner IP header", row)
		}
	}
	if dirs[src[0]] == 0 || dirs[src[1]] == 0 {
		t.Fatalf("RoCEv2 in VXLAN by inner source: %v; want both hosts", dirs)
	}
	t.Logf("tshark: %d VXLAN datagrams with RoCEv2 inside (%v by inner source)", len(rows), dirs)

	roce := 0
	forEachUDP(t, pcap, proto.VXLANPort, func(payload []byte) {
		_, inner, err := proto.ParseVXLAN(payload)
		if err != nil {
			t.Fatalf("VXLAN datagram: %v", err)
		}
		p, err := proto.Parse(inner, proto.LinkEthernet)
		if err != nil {
			t.Fatalf("inner frame: %v", err)
		}
		if p.Type == proto.FrameRoCEv2 {
			roce++
			if !p.ICRCValid() {
				t.Errorf("inner %v PSN %d: bad ICRC", p.BTH.Opcode(), p.BTH.PSN())
			}
		}
	})
	if roce != len(rows) {
		t.Errorf("%d inner RoCEv2 frames decoded, tshark saw %d", roce, len(rows))
	}
	return roce
}

// CheckIBUDPCapture checks a capture of CaptureIn for InfiniBand in
// HiNIC's IB-over-UDP (fabric-wire.md): tshark finds datagrams to UDP
// 4792 from both outer addresses src and nothing malformed; each
// datagram then parses (proto.ParseIBUDP) with VNI vni, and every inner
// IB packet's VCRC and, where it has one, ICRC is valid. It returns how
// many data datagrams carried an IB packet.
func CheckIBUDPCapture(t testing.TB, tshark, pcap string, vni int, src [2]string) int {
	t.Helper()
	// tshark has no dissector for HiNIC's IB-over-UDP: its datagrams are
	// data to it, parsed below, and not fed to UDP's heuristic
	// dissectors, which read some payloads as another protocol's
	// (GOOSE/CLTP) and report them malformed.
	run := tsharkClean(t, tshark, pcap, "-d", "udp.port=="+strconv.Itoa(proto.IBUDPPort)+",data")
	dirs := map[string]int{}
	for _, row := range strings.Split(strings.TrimSpace(run("-r", pcap, "-Y", "udp.dstport == "+strconv.Itoa(proto.IBUDPPort),
		"-T", "fields", "-e", "ip.src")), "\n") {
		dirs[row]++
	}
	if dirs[src[0]] == 0 || dirs[src[1]] == 0 {
		t.Fatalf("IB-over-UDP datagrams by outer source: %v; want both hosts %v", dirs, src)
	}
	data := 0
	forEachUDP(t, pcap, proto.IBUDPPort, func(payload []byte) {
		typ, v, pkt, err := proto.ParseIBUDP(payload)
		if err != nil {
			t.Fatalf("IB-over-UDP datagram: %v", err)
		}
		if int(v) != vni {
			t.Fatalf("IB-over-UDP VNI %d, want %d", v, vni)
		}
		if typ != proto.IBUDPData {
			return // keepalive or flow control
		}
		p, err := proto.Parse(pkt, proto.LinkIB)
		if err != nil {
			t.Fatalf("inner IB packet: %v", err)
		}
		data++
		if !p.VCRCValid() || (p.HasTransport() && !p.ICRCValid()) {
			t.Errorf("inner IB packet %v: bad VCRC or ICRC", p.BTH.Opcode())
		}
	})
	if data == 0 {
		t.Error("no IB packet in the IB-over-UDP datagrams")
	}
	t.Logf("IB-over-UDP: %d datagrams with an IB packet inside (%v by outer source)", data, dirs)
	return data
}

// tsharkClean fails t when tshark finds a malformed frame or an error in
// pcap, and returns a function that runs tshark with testutil.TsharkArgs
// and opts (such as a -d decode-as rule), which this check uses too.
func tsharkClean(t testing.TB, tshark, pcap string, opts ...string) func(args ...string) string {
	t.Helper()
	run := func(args ...string) string {
		t.Helper()
		a := append(append([]string{}, testutil.TsharkArgs...), opts...)
		return testutil.RunTshark(t, tshark, append(a, args...)...)
	}
	// Frames tshark reads as SSH are left out: guests' own SSH across
	// the tunnel (the rack's mesh) has key exchanges that tshark 4.0
	// flags as errors, which are not the tunnel's or the fabric's.
	const bad = "!ssh && (_ws.malformed || _ws.expert.severity == error)"
	if m := strings.TrimSpace(run("-r", pcap, "-Y", bad)); m != "" {
		// The first one dissected in full, with its bytes: what to
		// look at first.
		first := run("-r", pcap, "-Y", "frame.number == "+strings.Fields(m)[0], "-V", "-x")
		t.Fatalf("tshark reports malformed frames:\n%s\nthe first:\n%s", m[:min(len(m), 2000)], first[:min(len(first), 8000)])
	}
	return run
}

// forEachUDP calls fn with the payload of every UDP datagram to port in
// the pcapng file pcap (CaptureIn's).
func forEachUDP(t testing.TB, pcap string, port uint16, fn func(payload []byte)) {
	t.Helper()
	fh, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	pr, err := pcapgo.NewNgReader(fh, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := pr.ReadPacketData()
		if err != nil {
			return
		}
		outer, err := proto.Parse(data, proto.LinkEthernet)
		if err != nil || len(outer.UDP) == 0 || outer.UDP.DstPort() != port {
			continue
		}
		off := len(data) - cap(outer.UDP) // the UDP header's offset
		end := off + int(outer.UDP.Length())
		if end > len(data) || end < off+proto.UDPHeaderSize {
			t.Fatalf("UDP length %d in a %d-byte frame", outer.UDP.Length(), len(data))
		}
		fn(data[off+proto.UDPHeaderSize : end])
	}
}
