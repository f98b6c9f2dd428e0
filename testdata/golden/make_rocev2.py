#!/usr/bin/python3
"""Golden RoCEv2 test vectors for HiNIC's frame parser and ICRC check.

What it makes
    testdata/rocev2-golden.pcap         31 Ethernet frames (pcap, LINKTYPE_ETHERNET = 1)
    testdata/golden/rocev2-golden.json  one expectation object per frame, in pcap order

    Frames 1-20 and 26 are RoCEv2 over IPv4 built with scapy; their ICRC is the
    one scapy's BTH.post_build computes (scapy.contrib.roce, "icrc_source":
    "scapy").  Frames 21-25 are byte-level edits of frame 1 made AFTER scapy
    computed its ICRC (the ICRC bytes are scapy's and are left untouched).
    Frame 27 is frame 1 cut inside the BTH, frame 28 is an ARP request.
    Frames 29-31 are RoCEv2 over IPv6: scapy 2.5 cannot compute an IPv6 ICRC
    (it warns and writes 00000000), so this script computes it with its own
    zlib.crc32 function icrc() ("icrc_source": "python-zlib"), following Linux
    rxe (drivers/infiniband/sw/rxe/rxe_icrc.c).  The same function is asserted
    to reproduce scapy's ICRC on every scapy-built IPv4 frame, and it is used
    to assert the expected icrc_ok of every frame.

How to run (from the repository root; needs Debian's python3-scapy and tshark)
    apt-get install -y python3-scapy tshark
    /usr/bin/python3 testdata/golden/make_rocev2.py            # write + check
    /usr/bin/python3 testdata/golden/make_rocev2.py --check    # only re-check
    /usr/bin/python3 testdata/golden/make_rocev2.py --no-tshark

    Use /usr/bin/python3: a pyenv/virtualenv python3 does not see Debian's
    scapy.  After writing, the script dissects the pcap with tshark and
    asserts that tshark's view (opcode, dest QP, PSN, P_Key, AckReq, PadCnt,
    RETH/AETH/AtomicETH/AtomicAckETH/DETH/ImmDt fields, ICRC bytes, ECN, VLAN,
    IPv4 header checksum, UDP checksum of frame 24) agrees with the JSON,
    that only the deliberately truncated frame is reported as malformed, and
    that the only expert infos are the expected ones (frame 27, and "Illegal
    checksum value (0)" for the IPv6 frames, whose UDP checksum is 0 as Linux
    rxe sends it).  tshark runs with --disable-protocol rpcordma and
    --disable-protocol infiniband.eoib: both heuristic payload dissectors
    wrongly claim RoCE payloads in tshark 4.0.17.

Versions used to produce the committed files
    python3-scapy 2.5.0+dfsg-2 (Debian 12 bookworm), tshark 4.0.17-0+deb12u3.
    The output is deterministic (fixed pcap timestamps, no randomness).

JSON conventions (see testdata/golden/README.md)
    All integers are JSON numbers (every 64-bit value used is < 2**53).
    ack_req and icrc_ok are booleans.  imm is the 4 ImmDt bytes read
    big-endian.  payload_len counts application payload bytes only (no
    extension headers, no pad, no ICRC).  pad is BTH PadCnt (= pad bytes that
    precede the ICRC).  dest_qp/psn/ecn/... are the values as they appear on
    the wire of that frame (i.e. after the edits of frames 21-25, 31).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import zlib

import scapy
from scapy.all import ARP, Dot1Q, Ether, IP, IPv6, Raw, UDP, raw, rdpcap, wrpcap
from scapy.contrib.roce import AETH, BTH, cnp

HERE = os.path.dirname(os.path.abspath(__file__))
PCAP = os.path.normpath(os.path.join(HERE, "..", "rocev2-golden.pcap"))
JSON = os.path.join(HERE, "rocev2-golden.json")

ROCE_PORT = 4791
MAC_A, MAC_B = "02:00:00:00:00:01", "02:00:00:00:00:02"
IP_A, IP_B = "10.42.0.1", "10.42.0.2"
IP6_A, IP6_B = "fd42::1", "fd42::2"
QP_A = 0x000123            # requester QP on host A (10.42.0.1)
QP_B_SEND = 0x0004D2       # responder QPs on host B (10.42.0.2)
QP_B_RDMA = 0x000A51
QP_B_UD = 0x000E01
QP_A_UD = 0x000D11
PKEY = 0xFFFF
DSCP_ROCE = 26
ECT0 = 0b10
CE = 0b11
TOS_ECT0 = (DSCP_ROCE << 2) | ECT0

OPCODES = {
    "RC_SEND_ONLY": 0x04,
    "RC_SEND_ONLY_WITH_IMMEDIATE": 0x05,
    "RC_RDMA_WRITE_FIRST": 0x06,
    "RC_RDMA_WRITE_MIDDLE": 0x07,
    "RC_RDMA_WRITE_LAST": 0x08,
    "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE": 0x09,
    "RC_RDMA_WRITE_ONLY": 0x0A,
    "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE": 0x0B,
    "RC_RDMA_READ_REQUEST": 0x0C,
    "RC_RDMA_READ_RESPONSE_FIRST": 0x0D,
    "RC_RDMA_READ_RESPONSE_MIDDLE": 0x0E,
    "RC_RDMA_READ_RESPONSE_LAST": 0x0F,
    "RC_RDMA_READ_RESPONSE_ONLY": 0x10,
    "RC_ACKNOWLEDGE": 0x11,
    "RC_ATOMIC_ACKNOWLEDGE": 0x12,
    "RC_COMPARE_SWAP": 0x13,
    "RC_FETCH_ADD": 0x14,
    "UD_SEND_ONLY": 0x64,
    "UD_SEND_ONLY_WITH_IMMEDIATE": 0x65,
    "CNP": 0x81,
}

# ---------------------------------------------------------------------------
# Extension headers scapy 2.5 does not have (only BTH, AETH, GRH, CNPPadding
# and cnp() exist in scapy.contrib.roce).  Built as raw big-endian bytes and
# placed after the BTH; scapy's BTH.post_build runs its ICRC over everything
# that follows the BTH (raw(pshdr[BTH].payload)), so they are covered.


def reth(va, rkey, dma_len):          # 16 bytes
    return struct.pack("!QII", va, rkey, dma_len)


def immdt(imm):                       # 4 bytes
    return struct.pack("!I", imm)


def atomic_eth(va, rkey, swap, compare):   # 28 bytes
    return struct.pack("!QIQQ", va, rkey, swap, compare)


def atomic_ack_eth(orig):             # 8 bytes
    return struct.pack("!Q", orig)


def deth(qkey, src_qp):               # 8 bytes: Q_Key, rsv8, SrcQP24
    return struct.pack("!II", qkey, src_qp & 0xFFFFFF)


def pattern(n, seed):
    """Deterministic, non-trivial payload bytes."""
    return bytes(((i * 37 + seed * 11 + (i >> 3)) & 0xFF) for i in range(n))


# ---------------------------------------------------------------------------
# Independent ICRC (Linux rxe rules), used for IPv6 and to cross-check scapy.

FF8 = b"\xff" * 8


def parse_l2(frame):
    """Return (ethertype, offset of L3, vlan id or None)."""
    off, vlan = 12, None
    et = struct.unpack_from("!H", frame, off)[0]
    off += 2
    while et in (0x8100, 0x88A8):
        tci = struct.unpack_from("!H", frame, off)[0]
        vlan = tci & 0x0FFF
        et = struct.unpack_from("!H", frame, off + 2)[0]
        off += 4
    return et, off, vlan


def icrc(frame):
    """RoCEv2 ICRC of an Ethernet frame (the 4 trailing ICRC bytes excluded).

    CRC-32/IEEE (= zlib.crc32) over 8 x 0xFF | IP header | UDP header | BTH |
    rest of the UDP payload up to (not including) the ICRC, with variant
    fields set to all ones:
      IPv4: TOS (DSCP+ECN), TTL, header checksum
      IPv6: traffic class + flow label (first word -> 0x6FFFFFFF), hop limit
      UDP:  checksum
      BTH:  byte 4 (FECN, BECN, resv6)
    The end of the packet is taken from the IP length fields (so Ethernet
    padding would be excluded)."""
    et, off, _ = parse_l2(frame)
    if et == 0x0800:
        ihl = (frame[off] & 0x0F) * 4
        ip = bytearray(frame[off:off + ihl])
        ip[1] = 0xFF                      # TOS
        ip[8] = 0xFF                      # TTL
        ip[10:12] = b"\xff\xff"           # header checksum
        end = off + struct.unpack_from("!H", frame, off + 2)[0]
        l4 = off + ihl
    elif et == 0x86DD:
        ip = bytearray(frame[off:off + 40])
        ip[0:4] = struct.pack("!I", 0x6FFFFFFF)   # version | TC | flow label
        ip[7] = 0xFF                              # hop limit
        l4 = off + 40
        end = l4 + struct.unpack_from("!H", frame, off + 4)[0]
    else:
        raise ValueError("not IP")
    udp = bytearray(frame[l4:l4 + 8])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(frame[l4 + 8:l4 + 20])
    bth[4] = 0xFF
    rest = frame[l4 + 20:end - 4]
    return zlib.crc32(FF8 + bytes(ip) + bytes(udp) + bytes(bth) + rest) & 0xFFFFFFFF


def wire_icrc(frame):
    """ICRC as stored in the frame: the 4 trailing bytes, little-endian."""
    et, off, _ = parse_l2(frame)
    if et == 0x0800:
        end = off + struct.unpack_from("!H", frame, off + 2)[0]
    else:
        end = off + 40 + struct.unpack_from("!H", frame, off + 4)[0]
    return struct.unpack("<I", frame[end - 4:end])[0]


def ipv4_checksum(hdr):
    hdr = bytearray(hdr)
    hdr[10:12] = b"\x00\x00"
    s = sum(struct.unpack("!%dH" % (len(hdr) // 2), bytes(hdr)))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ones_sum(data):
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


# ---------------------------------------------------------------------------
# Frame builders

def l2l3(ip_version=4, src="A", tos=TOS_ECT0, ttl=64, ip_id=0, vlan=None,
         flow_label=0):
    a_to_b = src == "A"
    eth = Ether(src=MAC_A if a_to_b else MAC_B, dst=MAC_B if a_to_b else MAC_A)
    if vlan is not None:
        vid, pcp = vlan
        eth = eth / Dot1Q(vlan=vid, prio=pcp)
    if ip_version == 4:
        ip = IP(src=IP_A if a_to_b else IP_B, dst=IP_B if a_to_b else IP_A,
                tos=tos, ttl=ttl, id=ip_id, flags="DF")
    else:
        ip = IPv6(src=IP6_A if a_to_b else IP6_B, dst=IP6_B if a_to_b else IP6_A,
                  tc=tos, fl=flow_label, hlim=ttl)
    return eth / ip


def roce(opcode, dqp, psn, sport, ack_req=0, ext=b"", payload=b"", aeth=None,
         **l3kw):
    """Ether/IP/UDP(4791, chksum 0)/BTH[/AETH]/ext/payload/pad, ICRC by scapy
    (IPv4).  For IPv6 the ICRC is left 00000000 here (scapy 2.5 cannot
    compute it) and patched by the caller.  Returns (scapy packet, pad)."""
    pad = (-len(payload)) % 4
    bth = BTH(opcode=opcode, padcount=pad, pkey=PKEY, dqpn=dqp, ackreq=ack_req,
              psn=psn)
    if l3kw.get("ip_version", 4) == 6:
        bth.icrc = 0
    pkt = l2l3(**l3kw) / UDP(sport=sport, dport=ROCE_PORT, chksum=0) / bth
    if aeth is not None:
        pkt = pkt / AETH(syndrome=aeth[0], msn=aeth[1])
    body = ext + payload + b"\x00" * pad
    if body:
        pkt = pkt / Raw(body)
    return pkt, pad


# ---------------------------------------------------------------------------
# Expectations

def expect(frame_no, name, dqp, psn, ack_req=0, pad=0, payload_len=0,
           ip_version=4, ecn=ECT0, vlan=None, icrc_ok=True,
           icrc_source="scapy", note=None, **hdrs):
    e = {"frame": frame_no, "link": "roce-v2", "opcode": name,
         "opcode_value": OPCODES[name], "ip_version": ip_version}
    if vlan is not None:
        e["vlan"] = vlan
    e.update({"ecn": ecn, "dest_qp": dqp, "psn": psn,
              "ack_req": bool(ack_req), "pkey": PKEY, "pad": pad})
    for k in ("reth", "aeth", "atomic", "atomic_ack", "deth", "imm"):
        if k in hdrs:
            e[k] = hdrs.pop(k)
    assert not hdrs, hdrs
    e["payload_len"] = payload_len
    e["icrc_ok"] = icrc_ok
    e["icrc_source"] = icrc_source
    if note:
        e["note"] = note
    return e


# Byte offsets inside an untagged Ether/IPv4(20)/UDP/BTH frame.
O_IP, O_UDP, O_BTH, O_PAY4 = 14, 34, 42, 54


def set_ipv4_checksum(b, off=O_IP):
    ihl = (b[off] & 0x0F) * 4
    b[off + 10:off + 12] = struct.pack("!H", ipv4_checksum(b[off:off + ihl]))


class Golden:
    def __init__(self):
        self.frames = []        # raw frames (bytes)
        self.exps = []          # expectation dicts
        self.scapy_built = []   # indices whose ICRC scapy computed, untouched

    def add(self, frame, exp, scapy_computed=False):
        b = frame if isinstance(frame, (bytes, bytearray)) else raw(frame)
        assert exp["frame"] == len(self.frames) + 1, (exp["frame"], len(self.frames))
        self.frames.append(bytes(b))
        self.exps.append(exp)
        if scapy_computed:
            self.scapy_built.append(len(self.frames) - 1)
        return bytes(b)

    def std(self, no, name, dqp, psn, sport, ack_req=0, ext=b"", payload=b"",
            aeth=None, l3=None, note=None, **hdrs):
        """One frame built by scapy with the ICRC computed by scapy."""
        l3 = dict(l3 or {})
        l3.setdefault("ip_id", 0x4000 + no)
        l3.setdefault("tos", TOS_ECT0)
        pkt, pad = roce(OPCODES[name], dqp, psn, sport, ack_req, ext, payload,
                        aeth, **l3)
        if aeth is not None:
            hdrs["aeth"] = {"syndrome": aeth[0], "msn": aeth[1]}
        e = expect(no, name, dqp, psn, ack_req, pad, len(payload),
                   ecn=l3["tos"] & 3,
                   vlan=l3["vlan"][0] if l3.get("vlan") else None,
                   note=note, **hdrs)
        return self.add(pkt, e, scapy_computed=True)

    def v6(self, no, name, dqp, psn, sport, ack_req=0, ext=b"", payload=b"",
           l3=None, note=None, **hdrs):
        """IPv6 frame: scapy builds it, the ICRC comes from icrc() below."""
        l3 = dict(l3 or {})
        l3["ip_version"] = 6
        l3.setdefault("tos", TOS_ECT0)
        pkt, pad = roce(OPCODES[name], dqp, psn, sport, ack_req, ext, payload,
                        None, **l3)
        b = bytearray(raw(pkt))
        assert b[-4:] == b"\x00\x00\x00\x00"
        b[-4:] = struct.pack("<I", icrc(bytes(b)))
        e = expect(no, name, dqp, psn, ack_req, pad, len(payload), ip_version=6,
                   ecn=l3["tos"] & 3, icrc_source="python-zlib", note=note, **hdrs)
        return self.add(bytes(b), e)


def build():
    g = Golden()
    SP_SEND, SP_RDMA, SP_UD, SP_ATOM = 0xC1A3, 0xC2B7, 0xC3D5, 0xC4E9
    B = {"src": "B"}                      # responder -> requester direction
    B0 = {"src": "B", "tos": 0}           # ... without ECN (ACK/NAK)

    # 1 RC SEND_ONLY, AckReq
    f1 = g.std(1, "RC_SEND_ONLY", QP_B_SEND, 0x001000, SP_SEND, ack_req=1,
               payload=b"hello-rdma-golden-vector-1!!")
    # 2 RC SEND_ONLY_WITH_IMMEDIATE: ImmDt then payload
    g.std(2, "RC_SEND_ONLY_WITH_IMMEDIATE", QP_B_SEND, 0x001001, SP_SEND,
          ack_req=1, ext=immdt(0xCAFEF00D), payload=pattern(32, 2),
          imm=0xCAFEF00D)
    # 3-5 RDMA WRITE FIRST/MIDDLE/LAST: 600 bytes = 256 + 256 + 88 (MTU 256),
    #     PSN 0xFFFFFE, 0xFFFFFF, then wraps to 0
    va3, rk3 = 0x00007F3A12345000, 0x00C0FFEE
    g.std(3, "RC_RDMA_WRITE_FIRST", QP_B_RDMA, 0xFFFFFE, SP_RDMA,
          ext=reth(va3, rk3, 600), payload=pattern(256, 3),
          reth={"va": va3, "rkey": rk3, "dma_len": 600})
    g.std(4, "RC_RDMA_WRITE_MIDDLE", QP_B_RDMA, 0xFFFFFF, SP_RDMA,
          payload=pattern(256, 4))
    g.std(5, "RC_RDMA_WRITE_LAST", QP_B_RDMA, 0x000000, SP_RDMA, ack_req=1,
          payload=pattern(88, 5))
    # 6 RDMA WRITE ONLY WITH IMMEDIATE: RETH, ImmDt, payload
    va6, rk6 = 0x00007F3A12346000, 0x00C0FFEF
    g.std(6, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", QP_B_RDMA, 0x000001, SP_RDMA,
          ack_req=1, ext=reth(va6, rk6, 64) + immdt(0x00000042),
          payload=pattern(64, 6), reth={"va": va6, "rkey": rk6, "dma_len": 64},
          imm=0x00000042)
    # 7 RDMA READ REQUEST for 600 bytes (PSN 2; responses use PSN 2,3,4)
    va7, rk7 = 0x0000561234ABC000, 0x0001D00D
    g.std(7, "RC_RDMA_READ_REQUEST", QP_B_RDMA, 0x000002, SP_RDMA, ack_req=1,
          ext=reth(va7, rk7, 600), reth={"va": va7, "rkey": rk7, "dma_len": 600})
    # 8-10 READ RESPONSE FIRST/MIDDLE/LAST (B -> A)
    g.std(8, "RC_RDMA_READ_RESPONSE_FIRST", QP_A, 0x000002, SP_RDMA,
          aeth=(0x1F, 0x000010), payload=pattern(256, 8), l3=B)
    g.std(9, "RC_RDMA_READ_RESPONSE_MIDDLE", QP_A, 0x000003, SP_RDMA,
          payload=pattern(256, 9), l3=B)
    g.std(10, "RC_RDMA_READ_RESPONSE_LAST", QP_A, 0x000004, SP_RDMA,
          aeth=(0x1F, 0x000011), payload=pattern(88, 10), l3=B)
    # 11 READ RESPONSE ONLY, 13-byte payload -> PadCnt 3, 3 zero pad bytes
    g.std(11, "RC_RDMA_READ_RESPONSE_ONLY", QP_A, 0x000005, SP_RDMA,
          aeth=(0x1F, 0x000012), payload=b"odd-length!!!", l3=B,
          note="payload length 13: PadCnt=3, three 0x00 pad bytes precede the ICRC")
    # 12-14 ACK / NAK / RNR NAK (B -> A, not ECN capable)
    g.std(12, "RC_ACKNOWLEDGE", QP_A, 0x001001, SP_SEND,
          aeth=(0x1F, 0x000002), l3=B0,
          note="ACK, syndrome 0x1F: credit count 0b11111 (invalid/unlimited)")
    g.std(13, "RC_ACKNOWLEDGE", QP_A, 0x001005, SP_SEND,
          aeth=(0x60, 0x000002), l3=B0,
          note="NAK, syndrome 0x60: PSN sequence error")
    g.std(14, "RC_ACKNOWLEDGE", QP_A, 0x001005, SP_SEND,
          aeth=(0x2E, 0x000002), l3=B0,
          note="RNR NAK, syndrome 0x2E: 0x20 | RNR timer 0x0E")
    # 15-17 atomics
    va15, rk15 = 0x00007F3A12347008, 0x00C0FFF0
    cmp15, swp15 = 0x0000000000000000, 0x000DEADBEEF0001
    g.std(15, "RC_COMPARE_SWAP", QP_B_RDMA, 0x000006, SP_ATOM, ack_req=1,
          ext=atomic_eth(va15, rk15, swp15, cmp15),
          atomic={"va": va15, "rkey": rk15, "swap": swp15, "compare": cmp15})
    va16, add16 = 0x00007F3A12347010, 0x0000000000000007
    g.std(16, "RC_FETCH_ADD", QP_B_RDMA, 0x000007, SP_ATOM, ack_req=1,
          ext=atomic_eth(va16, rk15, add16, 0),
          atomic={"va": va16, "rkey": rk15, "swap": add16, "compare": 0},
          note="FETCH_ADD: add value in the swap field, compare 0")
    orig17 = 0x0012345678ABCDEF
    g.std(17, "RC_ATOMIC_ACKNOWLEDGE", QP_A, 0x000006, SP_ATOM,
          aeth=(0x1F, 0x000013), ext=atomic_ack_eth(orig17), l3=B,
          atomic_ack={"orig": orig17})
    # 18-19 UD
    qkey = 0x00C0FFEE
    g.std(18, "UD_SEND_ONLY", QP_B_UD, 0x3A5F10, SP_UD,
          ext=deth(qkey, QP_A_UD), payload=pattern(48, 18),
          deth={"qkey": qkey, "src_qp": QP_A_UD})
    g.std(19, "UD_SEND_ONLY_WITH_IMMEDIATE", QP_B_UD, 0x3A5F11, SP_UD,
          ext=deth(qkey, QP_A_UD) + immdt(0x12345678), payload=pattern(40, 19),
          deth={"qkey": qkey, "src_qp": QP_A_UD}, imm=0x12345678)
    # 20 CNP (B -> A, notification point tells the sender's QP), scapy cnp()
    pkt20 = l2l3(src="B", tos=48 << 2, ip_id=0x4014) / \
        UDP(sport=0xC5F1, dport=ROCE_PORT, chksum=0) / cnp(dqpn=QP_A)
    g.add(pkt20, expect(20, "CNP", QP_A, 0, ecn=0, payload_len=0,
                        note="scapy cnp(dqpn): BECN=1 (BTH byte 4 = 0x40), "
                             "16 reserved zero bytes (a reserved header field, not payload), "
                             "DSCP 48, not ECN capable"),
          scapy_computed=True)

    # 21-25: byte edits of frame 1 after scapy computed its ICRC
    e1 = g.exps[0]

    def variant(no, note, icrc_ok, **changes):
        e = dict(e1, frame=no, icrc_ok=icrc_ok, note=note)
        e.update(changes)
        return e

    b = bytearray(f1)
    b[O_PAY4 + 3] ^= 0x01
    g.add(b, variant(21, "frame 1 with payload byte 3 bit 0 flipped after the "
                         "ICRC was computed", False))

    b = bytearray(f1)
    b[O_IP + 8] = 63                                  # TTL 64 -> 63
    b[O_IP + 1] = (DSCP_ROCE << 2) | CE               # ECN ECT(0) -> CE
    set_ipv4_checksum(b)
    g.add(b, variant(22, "frame 1 with TTL 64->63 and ECN ECT(0)->CE (TOS "
                         "0x6a->0x6b), IPv4 header checksum recomputed, ICRC "
                         "untouched (masked fields)", True, ecn=CE))

    b = bytearray(f1)
    b[O_BTH + 4] = 0xC0                               # FECN=1 BECN=1
    g.add(b, variant(23, "frame 1 with BTH FECN=1 and BECN=1 (byte 4 = 0xC0), "
                         "ICRC untouched (masked byte)", True))

    b = bytearray(f1)
    ulen = struct.unpack_from("!H", b, O_UDP + 4)[0]
    pseudo = b[O_IP + 12:O_IP + 20] + struct.pack("!BBH", 0, 17, ulen)
    seg = bytes(b[O_UDP:O_UDP + ulen])
    cs = (~ones_sum(bytes(pseudo) + seg)) & 0xFFFF or 0xFFFF
    b[O_UDP + 6:O_UDP + 8] = struct.pack("!H", cs)
    g.add(b, variant(24, "frame 1 with a valid nonzero UDP checksum 0x%04x "
                         "(instead of 0), ICRC untouched (masked field)" % cs,
                     True))

    b = bytearray(f1)
    b[O_BTH + 5:O_BTH + 8] = (QP_B_SEND + 1).to_bytes(3, "big")
    g.add(b, variant(25, "frame 1 with BTH DestQP 0x%06x -> 0x%06x, ICRC "
                         "untouched (DestQP is invariant)" % (QP_B_SEND, QP_B_SEND + 1),
                     False, dest_qp=QP_B_SEND + 1))

    # 26 VLAN-tagged SEND_ONLY
    g.std(26, "RC_SEND_ONLY", QP_B_SEND, 0x001002, SP_SEND, ack_req=1,
          payload=b"tagged vlan 42 pcp 3 send..", l3={"vlan": (42, 3)},
          note="802.1Q tag VLAN 42, PCP 3; ICRC covers IP onward only; "
               "payload length 27: PadCnt=1")
    # 27 truncated inside the BTH
    g.add(f1[:O_BTH + 6], {"frame": 27, "link": "roce-v2", "error": "truncated",
                           "note": "frame 1 cut after 6 of the 12 BTH bytes "
                                   "(48 bytes; IP/UDP lengths still claim the "
                                   "full packet)"})
    # 28 ARP request
    arp = Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / \
        ARP(op=1, hwsrc=MAC_A, psrc=IP_A, hwdst="00:00:00:00:00:00", pdst=IP_B)
    g.add(arp, {"frame": 28, "link": "other",
                "note": "ARP request who-has 10.42.0.2 tell 10.42.0.1 "
                        "(42 bytes, no Ethernet padding)"})

    # 29-31 IPv6 (ICRC from icrc(), not scapy)
    f29 = g.v6(29, "RC_SEND_ONLY", QP_B_SEND, 0x001003, SP_SEND, ack_req=1,
               payload=b"ipv6 rocev2 send only 29", l3={"flow_label": 0x3A5C1})
    g.v6(30, "UD_SEND_ONLY", QP_B_UD, 0x3A5F12, SP_UD,
         ext=deth(qkey, QP_A_UD), payload=pattern(22, 30),
         l3={"flow_label": 0x0C3D5}, deth={"qkey": qkey, "src_qp": QP_A_UD},
         note="payload length 22: PadCnt=2")
    b = bytearray(f29)
    b[O_IP:O_IP + 4] = struct.pack("!I", (6 << 28) | (((DSCP_ROCE << 2) | CE) << 20) | 0x0BEEF)
    b[O_IP + 7] = 61
    e = dict(g.exps[28], frame=31, ecn=CE,
             note="frame 29 with hop limit 64->61, flow label 0x3a5c1->0x0beef "
                  "and ECN ECT(0)->CE after the ICRC was computed, ICRC "
                  "untouched (masked fields)")
    g.add(b, e)
    return g


# ---------------------------------------------------------------------------
# Self checks (no tshark)

def self_check(g):
    # rxe folds the 8 x 0xFF prefix into the CRC register seed 0xDEBB20E3.
    assert zlib.crc32(FF8) ^ 0xFFFFFFFF == 0xDEBB20E3
    # scapy's BTH.pack_icrc == little-endian of the CRC value
    assert BTH.pack_icrc(0x11223344) == struct.pack("<I", 0x11223344)
    n = 0
    for i in g.scapy_built:
        f = g.frames[i]
        assert icrc(f) == wire_icrc(f), ("scapy/icrc() mismatch", i + 1)
        n += 1
    assert n >= 3
    for f, e in zip(g.frames, g.exps):
        if e["link"] != "roce-v2" or "error" in e:
            continue
        ok = icrc(f) == wire_icrc(f)
        assert ok == e["icrc_ok"], ("icrc_ok", e["frame"], ok)
        et, off, vlan = parse_l2(f)
        assert vlan == e.get("vlan")
        if et == 0x0800:
            assert e["ip_version"] == 4
            assert ipv4_checksum(f[off:off + 20]) == struct.unpack_from("!H", f, off + 10)[0]
            assert f[off + 1] & 3 == e["ecn"]
            l4 = off + 20
        else:
            assert e["ip_version"] == 6
            assert (struct.unpack_from("!I", f, off)[0] >> 20) & 3 == e["ecn"]
            l4 = off + 40
        assert struct.unpack_from("!H", f, l4 + 2)[0] == ROCE_PORT
        bth = f[l4 + 8:l4 + 20]
        assert bth[0] == e["opcode_value"]
        assert (bth[1] >> 4) & 3 == e["pad"]
        assert struct.unpack_from("!H", bth, 2)[0] == e["pkey"]
        assert int.from_bytes(bth[5:8], "big") == e["dest_qp"]
        assert bool(bth[8] & 0x80) == e["ack_req"]
        assert int.from_bytes(bth[9:12], "big") == e["psn"]
        for v in (e.get("reth", {}).get("va", 0), e.get("atomic", {}).get("swap", 0),
                  e.get("atomic", {}).get("va", 0), e.get("atomic_ack", {}).get("orig", 0)):
            assert v < 2 ** 53
    return n


# ---------------------------------------------------------------------------
# tshark cross-check

TSHARK_FIELDS = [
    "frame.number", "_ws.malformed", "vlan.id", "vlan.priority", "ip.version",
    "ipv6.version", "ip.dsfield.ecn", "ipv6.tclass.ecn", "ip.checksum.status",
    "udp.dstport", "udp.checksum", "udp.checksum.status", "infiniband.bth.opcode", "infiniband.bth.destqp",
    "infiniband.bth.psn", "infiniband.bth.p_key", "infiniband.bth.a",
    "infiniband.bth.padcnt", "infiniband.reth.va", "infiniband.reth.r_key",
    "infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.aeth.msn",
    "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt", "infiniband.deth.q_key",
    "infiniband.deth.srcqp", "infiniband.immdt", "data.len", "infiniband.vendor",
    "infiniband.invariant.crc", "arp.opcode", "_ws.expert.message",
]

# tshark expert messages that are expected (anything else is a failure)
EXPECTED_EXPERT = {
    "Illegal checksum value (0)":           # IPv6 + UDP checksum 0 (as rxe sends)
        lambda e: e.get("ip_version") == 6,
    "IPv4 total length exceeds packet length (34 bytes)": lambda e: "error" in e,
    "Bad length value 52 > IP payload length": lambda e: "error" in e,
    "Malformed Packet (Exception occurred)": lambda e: "error" in e,
}


# Heuristic payload dissectors that wrongly claim RoCE payloads in tshark
# 4.0.17: RPC-over-RDMA (SEND payloads, "[Malformed Packet: RPCoRDMA]") and
# Mellanox EoIB (takes the first 4 payload bytes of the UD SEND of frame 18
# as an "EoIB Encapsulation Header").
TSHARK_BASE = ["tshark", "--disable-protocol", "rpcordma",
               "--disable-protocol", "infiniband.eoib"]


def tshark_version():
    out = subprocess.run(["tshark", "--version"], capture_output=True,
                         text=True).stdout
    return out.splitlines()[0]


def tshark_check():
    """Dissect the pcap with tshark and compare with the JSON."""
    exps = json.load(open(JSON))
    frames = [bytes(p) for p in rdpcap(PCAP)]
    base = TSHARK_BASE + ["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                          "-r", PCAP]
    cmd = base + ["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a",
                  "-E", "aggregator=,"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = [dict(zip(TSHARK_FIELDS, l.split("\t"))) for l in res.stdout.splitlines()]
    assert len(rows) == len(exps) == len(frames), (len(rows), len(exps), len(frames))

    verbose = subprocess.run(base + ["-V"], capture_output=True, text=True, check=True).stdout
    malformed_frames = []
    cur = None
    for line in verbose.splitlines():
        if line.startswith("Frame ") and ":" in line:
            cur = int(line.split()[1].rstrip(":"))
        if "Malformed" in line and cur not in malformed_frames:
            malformed_frames.append(cur)
    want_malformed = [e["frame"] for e in exps if "error" in e]
    problems = []
    expert = {}
    if malformed_frames != want_malformed:
        problems.append("Malformed in -V output on frames %s, expected only %s"
                        % (malformed_frames, want_malformed))

    def num(s):
        s = s.strip()
        if s in ("", None):
            return None
        if s in ("True", "False"):
            return s == "True"
        return int(s, 0)

    for r, e, f in zip(rows, exps, frames):
        n = e["frame"]

        def chk(what, got, want):
            if got != want:
                problems.append("frame %d %s: tshark %r, json %r" % (n, what, got, want))

        chk("malformed", bool(r["_ws.malformed"]), "error" in e)
        for msg in filter(None, r["_ws.expert.message"].split(",")):
            if msg not in EXPECTED_EXPERT or not EXPECTED_EXPERT[msg](e):
                problems.append("frame %d unexpected expert info: %s" % (n, msg))
            else:
                expert.setdefault(msg, []).append(n)
        if e["link"] == "other":
            chk("arp.opcode", num(r["arp.opcode"]), 1)
            chk("bth present", r["infiniband.bth.opcode"], "")
            continue
        chk("udp.dstport", num(r["udp.dstport"]), ROCE_PORT)
        if num(r["udp.checksum"]):       # only frame 24 carries a UDP checksum
            chk("udp.checksum.status (1=good)", num(r["udp.checksum.status"]), 1)
        if "error" in e:
            chk("bth.opcode", num(r["infiniband.bth.opcode"]) if r["infiniband.bth.opcode"] else None, None)
            continue
        chk("vlan.id", num(r["vlan.id"]), e.get("vlan"))
        if e.get("vlan") is not None:
            chk("vlan.priority", num(r["vlan.priority"]), 3)
        if e["ip_version"] == 4:
            chk("ip.version", num(r["ip.version"]), 4)
            chk("ecn", num(r["ip.dsfield.ecn"]), e["ecn"])
            chk("ip.checksum.status (1=good)", num(r["ip.checksum.status"]), 1)
        else:
            chk("ipv6.version", num(r["ipv6.version"]), 6)
            chk("ecn", num(r["ipv6.tclass.ecn"]), e["ecn"])
        chk("bth.opcode", num(r["infiniband.bth.opcode"]), e["opcode_value"])
        chk("bth.destqp", num(r["infiniband.bth.destqp"]), e["dest_qp"])
        chk("bth.psn", num(r["infiniband.bth.psn"]), e["psn"])
        chk("bth.p_key", num(r["infiniband.bth.p_key"]), e["pkey"])
        chk("bth.a", num(r["infiniband.bth.a"]), e["ack_req"])
        chk("bth.padcnt", num(r["infiniband.bth.padcnt"]), e["pad"])
        if "reth" in e:
            chk("reth.va", num(r["infiniband.reth.va"]), e["reth"]["va"])
            chk("reth.r_key", num(r["infiniband.reth.r_key"]), e["reth"]["rkey"])
            chk("reth.dmalen", num(r["infiniband.reth.dmalen"]), e["reth"]["dma_len"])
        if "aeth" in e:
            chk("aeth.syndrome", num(r["infiniband.aeth.syndrome"]), e["aeth"]["syndrome"])
            chk("aeth.msn", num(r["infiniband.aeth.msn"]), e["aeth"]["msn"])
        else:
            chk("aeth present", r["infiniband.aeth.syndrome"], "")
        if "atomic" in e:
            # tshark 4.0 shows the AtomicETH VA and R_Key under the reth.* field names
            chk("atomiceth va (reth.va)", num(r["infiniband.reth.va"]), e["atomic"]["va"])
            chk("atomiceth rkey (reth.r_key)", num(r["infiniband.reth.r_key"]), e["atomic"]["rkey"])
            chk("atomiceth.swapdt", num(r["infiniband.atomiceth.swapdt"]), e["atomic"]["swap"])
            chk("atomiceth.cmpdt", num(r["infiniband.atomiceth.cmpdt"]), e["atomic"]["compare"])
        if "atomic_ack" in e:
            chk("atomicacketh.origremdt", num(r["infiniband.atomicacketh.origremdt"]),
                e["atomic_ack"]["orig"])
        if "deth" in e:
            chk("deth.q_key", num(r["infiniband.deth.q_key"]), e["deth"]["qkey"])
            chk("deth.srcqp", num(r["infiniband.deth.srcqp"]), e["deth"]["src_qp"])
        if "imm" in e:
            # tshark 4.0.17 lists the immdt field twice per frame
            chk("immdt", r["infiniband.immdt"].split(",")[0].replace(":", "").lower(),
                "%08x" % e["imm"])
        else:
            chk("immdt present", r["infiniband.immdt"], "")
        wire = f[-4:]
        if e["opcode"] == "CNP":
            # tshark 4.0.17: "Unknown (129)"; the 16 reserved bytes AND the
            # ICRC are shown together as vendor data, no invariant.crc field
            chk("CNP vendor data", r["infiniband.vendor"].split(",")[-1].replace(":", "").lower(),
                (b"\x00" * 16 + wire).hex())
            continue
        # payload: tshark's Data (data.len) includes the pad bytes
        chk("payload+pad length", num(r["data.len"]) or 0, e["payload_len"] + e["pad"])
        # ICRC: tshark shows the 4 wire bytes read big-endian (no validation)
        chk("invariant.crc", num(r["infiniband.invariant.crc"]), int.from_bytes(wire, "big"))
    return problems, malformed_frames, expert, res.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only run the tshark check")
    ap.add_argument("--no-tshark", action="store_true", help="skip the tshark check")
    ap.add_argument("-v", "--verbose", action="store_true", help="print tshark field rows")
    args = ap.parse_args()
    if not args.check:
        g = build()
        n = self_check(g)
        wrpcap(PCAP, [Ether(f) for f in g.frames], linktype=1)
        # fixed timestamps for reproducible output
        with open(PCAP, "r+b") as fh:
            data = bytearray(fh.read())
            off = 24
            for i, f in enumerate(g.frames):
                struct.pack_into("<II", data, off, 1700000000, i * 1000)
                incl = struct.unpack_from("<I", data, off + 8)[0]
                assert incl == len(f)
                assert bytes(data[off + 16:off + 16 + incl]) == f
                off += 16 + incl
            assert off == len(data)
            fh.seek(0)
            fh.write(data)
        with open(JSON, "w") as fh:
            json.dump(g.exps, fh, indent=2)
            fh.write("\n")
        print("scapy %s: wrote %s (%d frames) and %s; icrc() == scapy ICRC on %d frames"
              % (scapy.VERSION, os.path.relpath(PCAP), len(g.frames),
                 os.path.relpath(JSON), n))
    if args.no_tshark:
        return 0
    problems, malformed, expert, rows = tshark_check()
    if args.verbose:
        print("\t".join(TSHARK_FIELDS))
        print(rows)
    print("%s: malformed frames %s" % (tshark_version(), malformed))
    for msg, nums in sorted(expert.items()):
        print("  expected expert info %r on frames %s" % (msg, nums))
    if problems:
        print("tshark disagrees:\n  " + "\n  ".join(problems))
        return 1
    print("tshark agrees with the JSON on every frame")
    return 0


if __name__ == "__main__":
    sys.exit(main())
