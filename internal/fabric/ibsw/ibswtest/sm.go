package ibswtest

import (
	"github.com/PacketFive/hinic/internal/ibsm"
	"github.com/PacketFive/hinic/internal/proto"
)

// OpenSM's defaults, as package ibsm uses them.
const (
	SMPacketLifeTime = ibsm.SMPacketLifeTime
	SMGIDPrefix      = ibsm.SMGIDPrefix
)

// ErrNoAnswer means a request got no answer once the fabric went idle.
var ErrNoAnswer = ibsm.ErrNoAnswer

// SM is package ibsm's subnet manager behind a CA of an in-memory Fabric:
// every request is sent from the CA and answered once the fabric is idle.
type SM struct {
	*ibsm.SM
	F  *Fabric
	CA *CA
}

// NewSM puts an SM behind ca. The CA's OnMAD is taken over.
func NewSM(f *Fabric, ca *CA) *SM {
	p := &smPort{f: f, ca: ca}
	ca.OnMAD = func(mad []byte) { p.inbox = append(p.inbox, mad) }
	return &SM{SM: ibsm.New(p), F: f, CA: ca}
}

// smPort is ibsm.Port over a CA of an in-memory Fabric.
type smPort struct {
	f     *Fabric
	ca    *CA
	inbox [][]byte
}

func (p *smPort) SMP(dlid uint16, mad []byte) ([]byte, error) {
	smp := proto.SMP(mad)
	if smp.IsDirectedRoute() && !smp.Direction() {
		if smp.HopCount() == 0 {
			// HopCount 0 never reaches the wire: the local device
			// answers (fabric-facts 2.3).
			return p.ca.LocalMAD(mad), nil
		}
		// C14-9:1: the sending CA steps HopPointer to 1.
		smp.SetHopPointer(1)
		return p.exchange(SMPPacket(proto.LIDPermissive, proto.LIDPermissive, mad), smp.TransactionID())
	}
	return p.exchange(SMPPacket(dlid, p.ca.LID(), mad), smp.TransactionID())
}

func (p *smPort) GMP(dlid uint16, mad []byte) ([]byte, error) {
	return p.exchange(GMPPacket(dlid, p.ca.LID(), 0, proto.PKeyDefault, mad), proto.MAD(mad).TransactionID())
}

// exchange sends pkt from the CA, runs the fabric until idle and returns
// the answer carrying tid.
func (p *smPort) exchange(pkt []byte, tid uint64) ([]byte, error) {
	p.inbox = p.inbox[:0]
	p.ca.Send(pkt)
	if err := p.f.Run(); err != nil {
		return nil, err
	}
	for _, m := range p.inbox {
		if proto.MAD(m).TransactionID() == tid {
			return m, nil
		}
	}
	return nil, ErrNoAnswer
}
