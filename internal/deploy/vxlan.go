package deploy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/PacketFive/hinic/internal/proto"
)

// A rack that spans hosts is one rack spec per host, each naming its own
// switches and guests; a link with remote joins one of its switch ports to
// the other host's rack over VXLAN (an ib link: IB-over-UDP), the port
// kind vxlan of docs/fabric.md. Both specs give the link, each with the
// other host as remote and the same VNI.

// remote reports whether the link leaves the host.
// A link with both ends and a vni joins switches of two hosts of the
// rack (hosts.go), which HostRack makes a remote link on each side.
func (l Link) remote() bool { return l.Remote != "" || l.Local != "" || (l.VNI != 0 && l.B == "") }

// remotePort returns the port of switch sw that a remote link uses.
func (l Link) remotePort(sw string) (int, bool) {
	if !l.remote() {
		return 0, false
	}
	s, num, _ := strings.Cut(l.A, ":")
	n, err := strconv.Atoi(num)
	return n, err == nil && s == sw
}

// checkRemoteLink checks links[i], a link with remote.
func (r *Rack) checkRemoteLink(i int, l Link) error {
	at := func(k string) string { return fmt.Sprintf("links[%d].%s", i, k) }
	switch {
	case l.Remote == "":
		return r.src.errAt(at("remote"), "a link with local or vni needs remote, the other host's address")
	case l.B != "":
		return r.src.errAt(at("b"), "a link to a remote host has no b: the far end is in that host's rack spec")
	case l.VNI < 1 || l.VNI > proto.MaxVNI:
		return r.src.errAt(at("vni"), "%d: a remote link needs a vni, 1 to %d", l.VNI, proto.MaxVNI)
	}
	sw := r.linkSwitch(l.A)
	s := r.switchByName(sw)
	if s == nil {
		return r.src.errAt(at("a"), "%q: no switch %s in the rack", l.A, sw)
	}
	n, _ := l.remotePort(sw)
	if n < 1 || n > s.Ports {
		return r.src.errAt(at("a"), "%q: switch %s has ports 1 to %d", l.A, sw, s.Ports)
	}
	for _, g := range r.Guests {
		if g.Switch == sw && g.Port == n {
			return r.src.errAt(at("a"), "%q: guest %s is on that port", l.A, g.Name)
		}
	}
	return nil
}
