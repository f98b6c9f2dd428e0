package fabric

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
)

// TestTwoSwitchesOneProcess joins two racks' TORs with a link and checks
// that MAC learning works across it.
func TestTwoSwitchesOneProcess(t *testing.T) {
	f := startFabric(t, Config{
		Switches: []SwitchConfig{{Name: "tor1", Ports: 4}, {Name: "tor2", Ports: 4}},
		Links:    []LinkConfig{{A: "tor1:4", B: "tor2:4"}},
	})
	tor1, tor2 := f.Switch("tor1"), f.Switch("tor2")
	waitFor(t, "link up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	checkAcross(t, tor1, tor2)
	if st := portStatus(tor1, 4); st.Kind != "link" || st.Peer.Name != "tor2/port4" || st.Peer.Role != "switch" {
		t.Errorf("tor1 port 4: %+v", st)
	}
}

// TestTwoSwitchesTwoFabrics runs the TORs as two fabrics (as two
// processes would): tor2's port 4 dials tor1's port 4 socket with a
// switch hello.
func TestTwoSwitchesTwoFabrics(t *testing.T) {
	f1 := startFabric(t, Config{Switches: []SwitchConfig{{Name: "tor1", Ports: 4}}})
	tor1 := f1.Switch("tor1")
	f2 := startFabric(t, Config{Switches: []SwitchConfig{{
		Name: "tor2", Ports: 4, Port: []PortConfig{{Num: 4, Dial: tor1.SocketPath(4)}},
	}}})
	tor2 := f2.Switch("tor2")
	waitFor(t, "link up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	if st := portStatus(tor1, 4); st.Peer.Role != "switch" || st.Peer.Name != "tor2/port4" {
		t.Errorf("tor1 port 4 peer %+v", st.Peer)
	}
	checkAcross(t, tor1, tor2)

	// tor1 restarts: tor2 dials again and the link comes back.
	f1.Close()
	waitFor(t, "link down", func() bool { return torndown(tor2.ports[3]) })
	f1b := startFabric(t, Config{RunDir: f1.RunDir(), Switches: []SwitchConfig{{Name: "tor1", Ports: 4}}})
	tor1 = f1b.Switch("tor1")
	waitFor(t, "link back up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	checkAcross(t, tor1, tor2)
}

func checkAcross(t *testing.T, tor1, tor2 *Switch) {
	t.Helper()
	a := connect(t, tor1, 1, 1)
	b := connect(t, tor2, 1, 2)
	fr := ethFrame(bcast, a.mac, -1, 0, 100, 1)
	a.send(fr)
	b.expectFrame(fr)
	fr = ethFrame(a.mac, b.mac, -1, 0, 100, 2)
	b.send(fr)
	a.expectFrame(fr)
	fr = ethFrame(b.mac, a.mac, 0, 3, 1500, 3)
	a.send(fr)
	b.expectFrame(fr)
	if !hasFDB(tor1, b.mac, 4) || !hasFDB(tor2, a.mac, 4) || !hasFDB(tor1, a.mac, 1) || !hasFDB(tor2, b.mac, 1) {
		t.Errorf("FDBs: tor1 %+v tor2 %+v", tor1.Status().FDB, tor2.Status().FDB)
	}
	a.c.Close()
	b.c.Close()
	waitFor(t, "nics gone", func() bool { return !tor1.ports[0].isUp() && !tor2.ports[0].isUp() })
}

// qemuPeer speaks QEMU's -netdev stream framing.
type qemuPeer struct {
	c  net.Conn
	br *bufio.Reader
}

func (q *qemuPeer) send(t *testing.T, fr []byte) {
	t.Helper()
	buf := binary.BigEndian.AppendUint32(nil, uint32(len(fr)))
	if _, err := q.c.Write(append(buf, fr...)); err != nil {
		t.Fatal(err)
	}
}

func (q *qemuPeer) recv(t *testing.T) []byte {
	t.Helper()
	q.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(q.br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	fr := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(q.br, fr); err != nil {
		t.Fatal(err)
	}
	return fr
}

func TestQEMUStreamPort(t *testing.T) {
	f := startFabric(t, Config{Switches: []SwitchConfig{{
		Ports: 2, Port: []PortConfig{{Num: 2, Kind: KindQEMUStream}},
	}}})
	sw := f.Switches()[0]
	a := connect(t, sw, 1, 1)
	c, err := net.Dial("unix", sw.SocketPath(2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := &qemuPeer{c: c, br: bufio.NewReader(c)}
	waitFor(t, "stream port up", func() bool { return sw.ports[1].isUp() })
	vm := macN(7)
	for i := range 20 { // several frames per write and per read
		q.send(t, ethFrame(bcast, vm, -1, 0, 60+i*70, byte(i)))
	}
	for i := range 20 {
		a.expectFrame(ethFrame(bcast, vm, -1, 0, 60+i*70, byte(i)))
	}
	for i := range 20 {
		a.send(ethFrame(vm, a.mac, -1, 0, 1400, byte(i)))
	}
	for i := range 20 {
		if got, want := q.recv(t), ethFrame(vm, a.mac, -1, 0, 1400, byte(i)); string(got) != string(want) {
			t.Fatalf("frame %d differs", i)
		}
	}
	// A second QEMU on a busy port is closed.
	c2, err := net.Dial("unix", sw.SocketPath(2))
	if err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c2.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("second stream peer: %d %v, want EOF", n, err)
	}
	c2.Close()
	// An absurd length closes the stream; the port comes back for a new one.
	q.c.Write([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	waitFor(t, "stream port down", func() bool { return !sw.ports[1].isUp() })
	if portStatus(sw, 2).Drops["malformed"] != 1 {
		t.Errorf("drops %v", portStatus(sw, 2).Drops)
	}
}

func TestPcap(t *testing.T) {
	dir := shortDir(t)
	f := startFabric(t, Config{Ports: 2, Pcap: dir})
	sw := f.Switches()[0]
	a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
	roce := roceFrame(t, b.mac, a.mac, 26<<2|2, 64, 7)
	reply := roceFrame(t, a.mac, b.mac, 26<<2|2, 64, 8)
	// b answers as soon as it has the frame: each port's capture holds
	// the question before the answer, whichever way the frame went.
	a.send(roce)
	b.expectFrame(roce)
	b.send(reply)
	a.expectFrame(reply)
	f.Close()
	for port := range 2 {
		port++
		path := filepath.Join(dir, "sw0-port"+string(rune('0'+port))+".pcap")
		lt, pkts := readPcap(t, path)
		if lt != 1 {
			t.Errorf("%s: link type %d", path, lt)
		}
		for n, data := range pkts {
			if want := [][]byte{roce, reply}[min(n, 1)]; string(data) != string(want) {
				t.Errorf("%s: packet %d differs", path, n)
			}
		}
		if len(pkts) != 2 {
			t.Errorf("%s: %d packets, want 2", path, len(pkts))
		}
		if tshark, err := exec.LookPath("tshark"); err == nil {
			out, err := exec.CommandContext(context.Background(), tshark, "-r", path, "-T", "fields", "-e", "infiniband.bth.psn").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "7\n8") {
				t.Errorf("tshark on %s: %v\n%s", path, err, out)
			}
		}
	}
}

// TestCaptureOnce: a frame is captured once however often its port
// tries to send it (a cut-through the peer had no room for, then the
// tx goroutine); a clone of it is a frame of its own.
func TestCaptureOnce(t *testing.T) {
	dir := shortDir(t)
	sw := newBareSwitch(t, SwitchConfig{Ports: 1})
	p := sw.ports[0]
	if err := p.openCapture(dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	f := sw.pool.get()
	f.buf = f.buf[:copy(f.buf, ethFrame(bcast, macN(1), -1, 0, 60, 1))]
	c := sw.pool.clone(f)
	for range 2 {
		p.capture(f)
		p.capture(c)
	}
	sw.release(f)
	sw.release(c)
	if g := sw.pool.get(); g.captured {
		t.Error("a frame from the pool is marked captured")
	}
	p.cap.close()
	if _, pkts := readPcap(t, filepath.Join(dir, "sw0-port1.pcap")); len(pkts) != 2 {
		t.Errorf("%d packets captured, want 2", len(pkts))
	}
}

func TestFaultInjection(t *testing.T) {
	tests := []struct {
		name   string
		faults FaultsConfig
		check  func(t *testing.T, got [][]byte, sent [][]byte)
	}{
		{"drop all", FaultsConfig{Drop: 1}, func(t *testing.T, got, sent [][]byte) {
			if len(got) != 0 {
				t.Errorf("%d frames passed", len(got))
			}
		}},
		{"duplicate all", FaultsConfig{Duplicate: 1}, func(t *testing.T, got, sent [][]byte) {
			if len(got) != 2*len(sent) {
				t.Errorf("%d frames, want %d", len(got), 2*len(sent))
			}
		}},
		{"reorder all", FaultsConfig{Reorder: 1}, func(t *testing.T, got, sent [][]byte) {
			// Held frames go out after the next one: 1 0 3 2 ...
			for i := 0; i+1 < len(got); i += 2 {
				if string(got[i]) != string(sent[i+1]) || string(got[i+1]) != string(sent[i]) {
					t.Fatalf("order at %d not swapped", i)
				}
			}
		}},
		{"corrupt all", FaultsConfig{Corrupt: 1, Seed: 7}, func(t *testing.T, got, sent [][]byte) {
			for i := range got {
				if string(got[i]) == string(sent[i]) || string(got[i][:14]) != string(sent[i][:14]) {
					t.Fatalf("frame %d not corrupted past the header", i)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFabric(t, Config{Switches: []SwitchConfig{{Ports: 2, Port: []PortConfig{{Num: 1, Faults: tt.faults}}}}})
			sw := f.Switches()[0]
			a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
			var sent, got [][]byte
			for i := range 10 {
				fr := ethFrame(bcast, a.mac, -1, 0, 100, byte(i))
				sent = append(sent, fr)
				a.send(fr)
			}
			for {
				fr := b.recvData(100 * time.Millisecond)
				if fr == nil {
					break
				}
				got = append(got, fr)
			}
			tt.check(t, got, sent)
			if portStatus(sw, 1).Faults == 0 {
				t.Error("faults_injected not counted")
			}
		})
	}
}

// TestFaultInjectionSeeded sends the same frames twice through a port
// with every fault enabled: the same seed gives the same frames out, in
// the same order, and the same counts by kind; another seed does not.
func TestFaultInjectionSeeded(t *testing.T) {
	faults := FaultsConfig{Drop: 0.1, Duplicate: 0.1, Reorder: 0.1, Corrupt: 0.1}
	run := func(seed uint64) ([][]byte, FaultCounts) {
		faults.Seed = seed
		f := startFabric(t, Config{Switches: []SwitchConfig{{Ports: 2, Port: []PortConfig{{Num: 1, Faults: faults}}}}})
		sw := f.Switches()[0]
		a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
		for i := range 200 {
			a.send(ethFrame(bcast, a.mac, -1, 0, 100, byte(i)))
		}
		var got [][]byte
		for {
			fr := b.recvData(100 * time.Millisecond)
			if fr == nil {
				break
			}
			got = append(got, fr)
		}
		ps := portStatus(sw, 1)
		k := ps.FaultKinds
		if k.Drop+k.Duplicate+k.Reorder+k.Corrupt != ps.Faults || ps.Drops["fault"] != k.Drop {
			t.Errorf("fault kinds %+v do not add up to %d (fault drops %d)", k, ps.Faults, ps.Drops["fault"])
		}
		return got, k
	}
	got1, k1 := run(42)
	got2, k2 := run(42)
	if k1 != k2 || len(got1) != len(got2) {
		t.Fatalf("seed 42 twice: %+v, %d frames; then %+v, %d frames", k1, len(got1), k2, len(got2))
	}
	for i := range got1 {
		if string(got1[i]) != string(got2[i]) {
			t.Fatalf("seed 42 twice: frame %d differs", i)
		}
	}
	if k1.Drop == 0 || k1.Duplicate == 0 || k1.Reorder == 0 || k1.Corrupt == 0 {
		t.Fatalf("200 frames at 10%% each: %+v", k1)
	}
	if _, k3 := run(43); k3 == k1 {
		t.Errorf("seeds 42 and 43 injected the same faults: %+v", k1)
	}
}

func TestControlStatus(t *testing.T) {
	f := startFabric(t, Config{Ports: 3})
	sw := f.Switches()[0]
	a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
	a.send(ethFrame(bcast, a.mac, -1, 0, 100, 0))
	b.expectFrame(ethFrame(bcast, a.mac, -1, 0, 100, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The switch counts a frame once its write returns, which can be
	// after the peer has read it: wait for port 2's count.
	var st *Status
	for {
		var err error
		if st, err = QueryStatus(ctx, f.RunDir()); err != nil {
			t.Fatal(err)
		}
		if len(st.Switches) != 1 || len(st.Switches[0].Ports) != 3 || st.Switches[0].Ports[1].TxFrames != 0 ||
			ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if len(st.Switches) != 1 || len(st.Switches[0].Ports) != 3 {
		t.Fatalf("status %+v", st)
	}
	p1 := st.Switches[0].Ports[0]
	if p1.State != "up" || p1.Peer.Name != "nic1" || p1.RxFrames != 1 || p1.RxBytes != 100 {
		t.Errorf("port 1 %+v", p1)
	}
	if p2 := st.Switches[0].Ports[1]; p2.TxFrames != 1 || p2.TxBytes != 100 {
		t.Errorf("port 2 %+v", p2)
	}
	if st.Switches[0].Ports[2].State != "down" || len(st.Switches[0].FDB) != 1 {
		t.Errorf("status %+v", st.Switches[0])
	}
	if _, err := QueryStatus(ctx, shortDir(t)); err == nil {
		t.Error("status of an empty run dir succeeded")
	}
}

func checkPcapLinkType(t *testing.T, path string, want int) {
	t.Helper()
	lt, pkts := readPcap(t, path)
	if lt != want {
		t.Errorf("%s: link type %d, want %d", path, lt, want)
	}
	if len(pkts) == 0 {
		t.Errorf("%s: no packet", path)
	}
}

// readPcap returns a capture's link type and packets.
func readPcap(t *testing.T, path string) (linkType int, pkts [][]byte) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return int(r.LinkType()), pkts
		}
		pkts = append(pkts, data)
	}
}
