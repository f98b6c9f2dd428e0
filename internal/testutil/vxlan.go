package testutil

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
)

// Captures of a link between two network namespaces (NetnsPair).

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
// VNI vni carrying RoCEv2 both ways, from the inner source addresses
// src, and nothing malformed; then it checks every inner frame's ICRC.
// It returns how many VXLAN datagrams carried RoCEv2.
func CheckVXLANCapture(t testing.TB, tshark, pcap string, vni int, src [2]string) int {
	t.Helper()
	run := func(args ...string) string {
		t.Helper()
		return RunTshark(t, tshark, append(append([]string{}, TsharkArgs...), args...)...)
	}
	if m := strings.TrimSpace(run("-r", pcap, "-Y", "_ws.malformed || _ws.expert.severity == error")); m != "" {
		t.Fatalf("tshark reports malformed frames:\n%s", m[:min(len(m), 2000)])
	}
	rows := strings.Split(strings.TrimSpace(run("-r", pcap, "-Y", "vxlan && infiniband", "-T", "fields",
		"-e", "udp.dstport", "-e", "vxlan.vni", "-e", "ip.src", "-e", "infiniband.bth.opcode")), "\n")
	dirs := map[string]int{}
	for _, row := range rows {
		col := strings.Split(row, "\t")
		if len(col) != 4 || !strings.HasPrefix(col[0], "4789") || col[1] != strconv.Itoa(vni) {
			t.Fatalf("tshark row %q: want UDP 4789 and VNI %d", row, vni)
		}
		// ip.src lists the outer source, then the inner one.
		srcs := strings.Split(col[2], ",")
		if len(srcs) != 2 {
			t.Fatalf("tshark row %q: want an outer and an inner IP header", row)
		}
		dirs[srcs[1]]++
	}
	if dirs[src[0]] == 0 || dirs[src[1]] == 0 {
		t.Fatalf("RoCEv2 in VXLAN by inner source: %v; want both hosts", dirs)
	}
	t.Logf("tshark: %d VXLAN datagrams with RoCEv2 inside (%v by inner source)", len(rows), dirs)

	fh, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	pr, err := pcapgo.NewNgReader(fh, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	roce := 0
	for {
		data, _, err := pr.ReadPacketData()
		if err != nil {
			break
		}
		outer, err := proto.Parse(data, proto.LinkEthernet)
		if err != nil || len(outer.UDP) == 0 || outer.UDP.DstPort() != proto.VXLANPort {
			continue
		}
		off := len(data) - cap(outer.UDP) // the UDP header's offset
		end := off + int(outer.UDP.Length())
		if end > len(data) || end < off+proto.UDPHeaderSize {
			t.Fatalf("UDP length %d in a %d-byte frame", outer.UDP.Length(), len(data))
		}
		_, inner, err := proto.ParseVXLAN(data[off+proto.UDPHeaderSize : end])
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
	}
	if roce != len(rows) {
		t.Errorf("%d inner RoCEv2 frames decoded, tshark saw %d", roce, len(rows))
	}
	return roce
}
