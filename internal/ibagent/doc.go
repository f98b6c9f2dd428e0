// Package ibagent holds the management agents every InfiniBand node of
// HiNIC runs, once: the subnet management agent (SMA, IBA 14.2) and the
// performance management agent (PMA, IBA 16.1). The HCA of the RDMA
// engine (rdma), HiSwitch's InfiniBand switch (fabric/ibsw) and the test
// CA (fabric/ibsw/ibswtest) plug their port state and counters in
// through small interfaces; the rules that make an answer (which
// requests get none, the M_Key check's place, the statuses, the
// response method, the PortInfo state rules, the PMA's port selection)
// live here.
//
// The agents work on a MAD in place: the caller copies the request into
// its own buffer and the agent turns it into the answer. They hold no
// state and no locks of their own; the interfaces' implementations lock
// what they share with other goroutines.
//
// ibagent imports, of the project, only proto.
package ibagent
