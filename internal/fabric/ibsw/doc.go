// Package ibsw is the InfiniBand half of HiSwitch: the forwarding logic and
// the management agents of one emulated IB switch, without any sockets.
//
// A Switch owns:
//
//   - the relay: link-level checks (LRH, VCRC), unicast forwarding through
//     the LinearForwardingTable, multicast through the
//     MulticastForwardingTable, SL to VL selection, the link-state rules
//     that decide which packets a port may receive and send, and partition
//     and raw-packet enforcement (IBA Vol 1 chapters 7 and 18);
//   - the subnet management agent (SMA) of switch port 0, answering
//     LID-routed and directed-route SMPs, including the directed-route hop
//     walk of IBA 14.2.2.2 (C14-9, C14-13) for SMPs that only pass through
//     (chapter 14);
//   - the performance management agent (PMA) of port 0, answering
//     ClassPortInfo and PortCounters for every port (chapter 16.1);
//   - the per-port state (PortInfo, P_Key tables, counters) and SwitchInfo.
//
// The caller (internal/fabric) owns the ports' sockets. It hands each
// received IB packet, LRH through VCRC, to Switch.Ingress with the port it
// arrived on, and transmits whatever Ingress emits; it reports cable
// changes with Switch.SetPortLink and reads Switch.Snapshot for status
// displays. docs/ib-switch.md describes what the switch answers and the
// rules it implements.
//
// ibsw imports only internal/proto, internal/ibagent (the SMA and PMA
// rules), internal/clock (whose Now times the M_Key lease) and the
// standard library; it knows nothing of sockets or
// goroutines.
//
// Concurrency: a Switch is not safe for concurrent use. It is owned by one
// goroutine (the fabric's IB relay loop), which makes every call: Ingress,
// SetPortLink and Snapshot. Ingress may rewrite the packet it is given in
// place (the VL and VCRC of a forwarded packet; the MAD, ICRC and VCRC of a
// directed-route SMP that passes through), and the slices it passes to emit
// are valid only during that emit call: whoever needs them later copies
// them.
package ibsw
