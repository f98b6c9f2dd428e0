package fabric

import (
	"bufio"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestQEMUStreamDial: a qemu-stream port with dial connects to a QEMU
// stream server (-netdev stream,server=on; here a listener that, as
// QEMU 7.2 does, takes one client at a time and the next after it
// left), carries frames both ways, and after the fabric restarts the
// new switch dials again and the frames flow on the same server.
func TestQEMUStreamDial(t *testing.T) {
	dir := shortDir(t)
	qemuSock := filepath.Join(dir, "qemu.sock")
	ln, err := net.Listen("unix", qemuSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := Config{RunDir: filepath.Join(dir, "fab"), Switches: []SwitchConfig{{
		Ports: 2, Port: []PortConfig{{Num: 2, Kind: KindQEMUStream, Dial: qemuSock}},
	}}}
	vm := macN(7)
	for round := range 2 {
		f := startFabric(t, cfg)
		sw := f.Switches()[0]
		a := connect(t, sw, 1, 1)
		ln.(*net.UnixListener).SetDeadline(time.Now().Add(20 * time.Second)) // hang guard
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("round %d: the switch did not dial: %v", round, err)
		}
		q := &qemuPeer{c: c, br: bufio.NewReader(c)}
		waitFor(t, "stream port up", func() bool { return sw.ports[1].isUp() })
		for i := range 5 {
			q.send(t, ethFrame(bcast, vm, -1, 0, 60+i*70, byte(i+round)))
		}
		for i := range 5 {
			a.expectFrame(ethFrame(bcast, vm, -1, 0, 60+i*70, byte(i+round)))
		}
		a.send(ethFrame(vm, a.mac, -1, 0, 1400, byte(round)))
		if got, want := q.recv(t), ethFrame(vm, a.mac, -1, 0, 1400, byte(round)); string(got) != string(want) {
			t.Fatalf("round %d: frame to the VM differs", round)
		}
		if st := portStatus(sw, 2); st.Peer.Role != "qemu" {
			t.Errorf("round %d: port 2 peer %+v", round, st.Peer)
		}
		// The fabric goes away: the server sees EOF, as QEMU does.
		f.Close()
		q.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := q.br.ReadByte(); err == nil {
			t.Fatalf("round %d: the stream stayed open after the fabric closed", round)
		}
		c.Close()
	}
}
