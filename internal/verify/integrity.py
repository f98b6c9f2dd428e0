# Two-host RDMA data-integrity check for `hinic verify e2e --rack`, run in
# the guests with python3-pyverbs (rdma-core 44). The server registers a
# buffer; the client fills its own with random bytes, RDMA WRITEs it into
# the server's buffer, RDMA READs it back into a second buffer, and sends
# the sha256 of what it wrote over TCP; the server compares the sha256 of
# what landed, the client that of what it read back. Exit 0 and one line
# "integrity ok BYTES" on success.
#
# GIDX is the RoCEv2 GID index, or -1 on InfiniBand (the peer by LID).
#
#   server: python3 integrity.py DEV GIDX PORT SIZE
#   client: python3 integrity.py DEV GIDX PORT SIZE SERVER_IP
import hashlib
import json
import os
import socket
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

CHUNK = 1 << 20  # bytes per work request


def main():
    dev, gidx, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    server_ip = sys.argv[5] if len(sys.argv) > 5 else None
    ctx = Context(name=dev)
    pd = PD(ctx)
    access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
    mr = MR(pd, size, access)
    back = MR(pd, size, access)
    cq = CQ(ctx, 256)
    cap = QPCap(max_send_wr=64, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    # A GID index of -1: an InfiniBand port, the peer addressed by LID.
    gid = ctx.query_gid(1, gidx) if gidx >= 0 else None
    psn = int.from_bytes(os.urandom(3), "big")
    mine = {"qpn": qp.qp_num, "psn": psn, "gid": str(gid), "lid": ctx.query_port(1).lid,
            "rkey": mr.rkey, "addr": mr.buf}

    if server_ip is None:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(1)
        conn, _ = ls.accept()
    else:
        conn = socket.create_connection((server_ip, port), timeout=60)
    # One file to read and one to write: a text file that does both
    # drops what it has read ahead when it is written to, and the peer's
    # "ready" can arrive in the same read as its JSON.
    r, f = conn.makefile("r"), conn.makefile("w")
    f.write(json.dumps(mine) + "\n")
    f.flush()
    peer = json.loads(r.readline())

    attr = QPAttr(port_num=1)
    attr.qp_access_flags = access
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = peer["qpn"]
    attr.rq_psn = peer["psn"]
    attr.sq_psn = psn
    attr.max_dest_rd_atomic = 1
    attr.max_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    if gidx >= 0:
        gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=gidx)
        gr.hop_limit = 64
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    else:
        attr.ah_attr = AHAttr(dlid=peer["lid"], port_num=1)
    qp.to_rts(attr)  # RESET -> INIT -> RTR -> RTS
    f.write("ready\n")
    f.flush()
    if r.readline().strip() != "ready":
        sys.exit("peer not ready")

    if server_ip is None:
        # Wait for the client's digest, then check what landed.
        digest = r.readline().strip()
        got = hashlib.sha256(mr.read(size, 0)).hexdigest()
        ok = got == digest
        f.write(("ok" if ok else "mismatch " + got) + "\n")
        f.flush()
        if not ok:
            sys.exit("integrity: server buffer sha256 %s, client wrote %s" % (got, digest))
        print("integrity ok %d" % size)
        return

    data = os.urandom(size)
    mr.write(data, size, 0)
    digest = hashlib.sha256(data).hexdigest()
    start = time.time()
    for op, local in ((e.IBV_WR_RDMA_WRITE, mr), (e.IBV_WR_RDMA_READ, back)):
        off = 0
        while off < size:
            n = min(CHUNK, size - off)
            wr = SendWR(opcode=op, num_sge=1, sg=[SGE(local.buf + off, n, local.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(peer["rkey"], peer["addr"] + off)
            qp.post_send(wr)
            while True:
                npolled, wcs = cq.poll()
                if npolled:
                    if wcs[0].status != e.IBV_WC_SUCCESS:
                        sys.exit("integrity: work completion status %d" % wcs[0].status)
                    break
            off += n
    secs = time.time() - start
    f.write(digest + "\n")
    f.flush()
    verdict = r.readline().strip()
    if verdict != "ok":
        sys.exit("integrity: server says " + verdict)
    back_digest = hashlib.sha256(back.read(size, 0)).hexdigest()
    if back_digest != digest:
        sys.exit("integrity: read back sha256 %s, wrote %s" % (back_digest, digest))
    print("integrity ok %d bytes written and read back in %.2f s" % (size, secs))


main()
