package fabric

import (
	"github.com/PacketFive/hinic/internal/fabric/ibsw"
	"github.com/PacketFive/hinic/internal/proto"
)

// ibswEngine adapts package ibsw to IBSwitch.
type ibswEngine struct {
	*ibsw.Switch
}

// defaultIB makes the IB engine of a switch with IB ports when the
// Config names none: package ibsw.
func defaultIB(cfg IBConfig) (IBSwitch, error) {
	s, err := ibsw.New(ibsw.Config{NodeGUID: cfg.NodeGUID, NumPorts: cfg.NumPorts, Description: cfg.Description, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return ibswEngine{s}, nil
}

// Status converts ibsw's snapshot: the valid LFT entries and the port
// states, with the whole snapshot for JSON.
func (e ibswEngine) Status() *IBStatus {
	snap := e.Snapshot()
	st := &IBStatus{LID: snap.LID, Raw: snap}
	for lid, port := range snap.LFT {
		if lid == 0 || port == proto.LFTPortDrop {
			continue
		}
		st.LFT = append(st.LFT, LFTEntry{LID: uint16(lid), Port: int(port)})
	}
	for _, p := range snap.Ports {
		st.Ports = append(st.Ports, IBPortStatus{Port: p.Port, State: ibsw.PortStateName(p.State)})
	}
	return st
}
