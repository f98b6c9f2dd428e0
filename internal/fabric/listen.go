package fabric

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/shmport"
	"github.com/PacketFive/hinic/internal/unixsock"
)

const (
	// helloTimeout bounds the wait for a peer's hello.
	helloTimeout = 5 * time.Second
	// redialMin and redialMax bound the back-off of a dialling port.
	redialMin = 100 * time.Millisecond
	redialMax = 2 * time.Second
	// socketMode is the mode of port and control sockets.
	socketMode = 0o660
)

// listen opens the port's socket: SOCK_SEQPACKET for a HiNIC port,
// SOCK_STREAM for a QEMU stream port.
func (p *port) listen() error {
	network := "unixpacket"
	if p.cfg.kind == KindQEMUStream {
		network = "unix"
	}
	ln, err := listenUnix(network, p.cfg.path)
	if err != nil {
		return fmt.Errorf("fabric: switch %s port %d: %w", p.sw.cfg.name, p.cfg.num, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.sw.wg.Add(1)
	go p.acceptLoop(ln)
	return nil
}

// listenUnix listens on path with mode 0660; a socket file already
// there is replaced only when stale (unixsock).
func listenUnix(network, path string) (*net.UnixListener, error) {
	return unixsock.Listen(network, path, socketMode)
}

func (p *port) closeListener() {
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	if ln != nil {
		ln.Close() // unlinks the socket file
	}
}

func (p *port) acceptLoop(ln *net.UnixListener) {
	sw := p.sw
	defer sw.wg.Done()
	unixsock.Accept(ln, unixsock.Handshakes{Ctx: sw.ctx, WG: &sw.wg, Sem: sw.hsSem}, func(c *net.UnixConn) {
		if p.cfg.kind == KindQEMUStream {
			p.acceptStream(c)
		} else {
			p.handshake(c)
		}
	})
}

// acceptStream attaches a QEMU stream connection; a second one while a
// peer holds the port is closed (the stream framing has no way to say
// why).
func (p *port) acceptStream(c *net.UnixConn) {
	if err := p.attach(c, PeerInfo{Name: "qemu", Role: "qemu"}, true); err != nil {
		c.Close()
	}
}

// shmOK reports whether this port takes shared-memory rings: a HiNIC
// (seqpacket) port of a switch that allows them.
func (p *port) shmOK() bool { return p.sw.shmOn && p.cfg.kind == KindSeqpacket }

// myHello is the switch's hello on this port with the given status and
// features.
func (p *port) myHello(status uint16, features uint32) []byte {
	return proto.AppendHello(nil, &proto.HelloFields{Features: features,
		Version: proto.HelloVersion, LinkLayer: p.cfg.helloLink(), Role: proto.HelloRoleSwitch,
		Status: status, MaxFrame: uint16(p.cfg.maxFrame), MAC: p.mac, PortNum: uint8(p.cfg.num),
		PortGUID: p.sw.cfg.nodeGUID, NodeGUID: p.sw.cfg.nodeGUID,
		Name: fmt.Sprintf("%s/port%d", p.sw.cfg.name, p.cfg.num),
	})
}

// checkHello validates a peer's hello against the port and returns the
// status to answer.
func (p *port) checkHello(b []byte, trunc bool) (proto.Hello, uint16) {
	if trunc {
		return nil, proto.HelloMalformed
	}
	h, err := proto.ParseHello(b)
	if err != nil {
		return nil, proto.HelloMalformed
	}
	switch {
	case h.Version() != proto.HelloVersion:
		return h, proto.HelloBadVersion
	case h.Role() != proto.HelloRoleNIC && h.Role() != proto.HelloRoleSwitch:
		return h, proto.HelloMalformed
	case h.LinkLayer() != p.cfg.helloLink():
		return h, proto.HelloWrongLinkLayer
	case int(h.MaxFrame()) > p.cfg.maxFrame:
		return h, proto.HelloFrameTooBig
	}
	return h, proto.HelloOK
}

// handshake reads the peer's hello, answers it and attaches the
// connection. Whatever the peer sends, the connection is either attached
// or answered and closed.
func (p *port) handshake(c *net.UnixConn) {
	sw := p.sw
	stop := context.AfterFunc(sw.ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetDeadline(time.Now().Add(helloTimeout))
	buf := make([]byte, proto.HelloMaxSize+1)
	n, _, flags, _, err := c.ReadMsgUnix(buf, nil)
	if err != nil || n == 0 {
		c.Close()
		return
	}
	h, status := p.checkHello(buf[:n], flags&syscall.MSG_TRUNC != 0)
	var peer PeerInfo
	if status == proto.HelloOK {
		peer = peerFromHello(h)
		p.mu.Lock()
		busy := p.sess != nil
		p.mu.Unlock()
		if busy {
			status = proto.HelloPortBusy
		}
	}
	if status != proto.HelloOK {
		c.Write(p.myHello(status, 0))
		c.Close()
		return
	}
	var features uint32
	if h.Features()&proto.HelloFeatureShm != 0 && p.shmOK() {
		features |= proto.HelloFeatureShm
	}
	if _, err := c.Write(p.myHello(proto.HelloOK, features)); err != nil {
		c.Close()
		return
	}
	var shm *shmport.Conn
	if features&proto.HelloFeatureShm != 0 {
		// The peer's next message is the setup; any refusal keeps the
		// socket for the frames.
		var st uint16
		shm, st, err = shmport.Accept(c, sw.shmMax, peer.MaxFrame, sw.shmOpt)
		if err != nil {
			c.Close()
			return
		}
		if st != shmport.StatusOK && st != shmport.StatusDeclined {
			sw.log.Info("shared memory refused", "port", p.cfg.num, "peer", peer.Name, "status", shmport.StatusText(st))
		}
	}
	if !stop() {
		if shm != nil {
			shm.Close()
		}
		c.Close() // the switch is closing
		return
	}
	c.SetDeadline(time.Time{})
	if err := p.attachShm(c, peer, false, shm); err != nil {
		// Lost a race with another peer between the check and attach:
		// the OK is already sent, so the close is the answer.
		c.Close()
	}
}

func peerFromHello(h proto.Hello) PeerInfo {
	f := h.Fields()
	role := "nic"
	if f.Role == proto.HelloRoleSwitch {
		role = "switch"
	}
	name := strings.ToValidUTF8(f.Name, "?")
	return PeerInfo{
		Name: name, Role: role, MAC: net.HardwareAddr(f.MAC[:]).String(), PortNum: int(f.PortNum),
		PortGUID: f.PortGUID, NodeGUID: f.NodeGUID, MaxFrame: int(f.MaxFrame),
	}
}

// dialLoop keeps a dialling port's link up: it dials the remote switch's
// port socket and says hello as a switch (an inter-switch link), or dials
// a QEMU stream server (a qemu-stream port), and runs the session; when
// the session ends it dials again, backing off.
func (p *port) dialLoop() {
	sw := p.sw
	defer sw.wg.Done()
	backoff := redialMin
	for {
		dial := p.dialOnce
		if p.cfg.kind == KindQEMUStream {
			dial = p.dialStream
		}
		pc, peer, err := dial()
		if err == nil {
			err = p.attachShm(pc.Conn, peer, p.cfg.kind == KindQEMUStream, pc.Shm)
			if err != nil {
				pc.Conn.Close()
			} else {
				backoff = redialMin
				p.mu.Lock()
				s := p.sess
				p.mu.Unlock()
				if s != nil {
					select {
					case <-s.done:
					case <-sw.ctx.Done():
						return
					}
					<-s.txDone
				}
			}
		}
		if err != nil {
			sw.log.Debug("dial", "port", p.cfg.num, "path", p.cfg.dial, "err", err)
		}
		select {
		case <-sw.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, redialMax)
	}
}

// dialStream connects to a QEMU -netdev stream,server=on socket. The
// stream has no hello: the connection is the link.
func (p *port) dialStream() (*PortConn, PeerInfo, error) {
	ctx, cancel := context.WithTimeout(p.sw.ctx, helloTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p.cfg.dial)
	if err != nil {
		return nil, PeerInfo{}, fmt.Errorf("fabric: dial %s: %w", p.cfg.dial, err)
	}
	return &PortConn{Conn: c.(*net.UnixConn)}, PeerInfo{Name: "qemu", Role: "qemu"}, nil
}

func (p *port) dialOnce() (*PortConn, PeerInfo, error) {
	ctx, cancel := context.WithTimeout(p.sw.ctx, helloTimeout)
	defer cancel()
	hello := proto.HelloFields{
		Version: proto.HelloVersion, LinkLayer: p.cfg.helloLink(), Role: proto.HelloRoleSwitch,
		MaxFrame: uint16(p.cfg.maxFrame), MAC: p.mac, PortNum: uint8(p.cfg.num),
		PortGUID: p.sw.cfg.nodeGUID, NodeGUID: p.sw.cfg.nodeGUID,
		Name: fmt.Sprintf("%s/port%d", p.sw.cfg.name, p.cfg.num),
	}
	c, ans, err := DialPortWith(ctx, p.cfg.dial, &hello, DialOptions{Shm: p.sw.shmOn, ShmOptions: p.sw.shmOpt})
	if err != nil {
		return nil, PeerInfo{}, err
	}
	return c, peerFromHello(ans), nil
}
