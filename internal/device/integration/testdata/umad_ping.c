// SPDX-License-Identifier: GPL-2.0
/*
 * umad_ping - one MAD from one guest's QP1 to the other's, through
 * ib_umad and ib_mad (the kernel GSI QP of the device).
 *
 *   umad_ping listen          wait up to 30 s for a vendor MAD, print it
 *   umad_ping send GID        send one to the QP1 of the port with GID
 *   umad_ping pma GID         query the PMA of the port with GID
 *
 * The MAD is a Get of vendor class 0x09 (IBTA vol. 1 13.4.4: range 1,
 * no OUI), addressed with a GRH to the peer's RoCE v2 GID (our GID
 * index 1), QP1 and the GSI Q_Key. Its data carries a marker the
 * listener checks.
 *
 * pma sends PerfMgt requests (class 0x04, IBA 16.1) the same way and
 * waits for each response. GID is the peer's IPv6 link-local GID,
 * reached from ours (index 0): ib_mad matches a response with its
 * request by comparing the request's SGID with the DGID of the
 * response's GRH (mad.c rcv_has_same_gid), and over RoCE v2/IPv4 that
 * area holds an IPv4 header, so responses to requests sent between
 * IPv4-mapped GIDs never match. It sends Get ClassPortInfo, Get PortCounters, Get
 * PortCountersExtended, a Set of PortCounters that clears the data and
 * packet counters, both Gets again, and a Get of PortSamplesControl,
 * which the PMA does not support. It prints the status and the counters
 * of each and fails if a status or a counter is not what the PMA must
 * answer after the traffic.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <rdma/ib_user_mad.h>

#define MAD_SIZE	256
#define MAD_CLASS	0x09
#define MAD_METHOD_GET	0x01
#define GSI_QKEY	0x80010000
#define MARKER		"HICAIN-MAD-PING"

struct packet {
	struct ib_user_mad_hdr hdr;
	unsigned char mad[MAD_SIZE];
};

static int open_agent(int listen)
{
	struct ib_user_mad_reg_req req;
	int fd = open("/dev/infiniband/umad0", O_RDWR);

	if (fd < 0) {
		perror("open umad0");
		return -1;
	}
	/* The header with pkey_index (struct ib_user_mad_hdr). */
	if (ioctl(fd, IB_USER_MAD_ENABLE_PKEY) < 0) {
		perror("IB_USER_MAD_ENABLE_PKEY");
		return -1;
	}
	memset(&req, 0, sizeof(req));
	req.qpn = 1;
	if (listen) {
		/* Unsolicited Gets of the class come to this agent. */
		req.mgmt_class = MAD_CLASS;
		req.mgmt_class_version = 1;
		req.method_mask[0] = 1UL << MAD_METHOD_GET;
	}
	if (ioctl(fd, IB_USER_MAD_REGISTER_AGENT, &req) < 0) {
		perror("IB_USER_MAD_REGISTER_AGENT");
		return -1;
	}
	return fd;
}

static int do_listen(void)
{
	struct pollfd p;
	struct packet pk;
	char gid[INET6_ADDRSTRLEN];
	ssize_t n;
	int fd = open_agent(1);

	if (fd < 0)
		return 1;
	printf("HICAIN-MAD-LISTEN\n");
	fflush(stdout);
	p.fd = fd;
	p.events = POLLIN;
	if (poll(&p, 1, 30000) != 1) {
		fprintf(stderr, "no MAD within 30 s\n");
		return 1;
	}
	n = read(fd, &pk, sizeof(pk));
	if (n < (ssize_t)sizeof(pk.hdr) + 24 + (ssize_t)sizeof(MARKER)) {
		fprintf(stderr, "read: %zd bytes: %s\n", n, n < 0 ? strerror(errno) : "short");
		return 1;
	}
	inet_ntop(AF_INET6, pk.hdr.gid, gid, sizeof(gid));
	printf("HICAIN-MAD-RECV class=0x%02x method=0x%02x qpn=%u grh=%u gid=%s data=%.*s\n",
	       pk.mad[1], pk.mad[3], ntohl(pk.hdr.qpn), pk.hdr.grh_present, gid,
	       (int)sizeof(MARKER) - 1, (char *)&pk.mad[24]);
	return memcmp(&pk.mad[24], MARKER, sizeof(MARKER)) != 0;
}

static int do_send(const char *dgid)
{
	struct packet pk;
	int fd = open_agent(0);

	if (fd < 0)
		return 1;
	memset(&pk, 0, sizeof(pk));
	if (inet_pton(AF_INET6, dgid, pk.hdr.gid) != 1) {
		fprintf(stderr, "bad GID %s\n", dgid);
		return 1;
	}
	pk.hdr.qpn = htonl(1);
	pk.hdr.qkey = htonl(GSI_QKEY);
	pk.hdr.grh_present = 1;
	pk.hdr.gid_index = 1;
	pk.hdr.hop_limit = 64;
	/* MAD header (IBTA vol. 1 13.4.3): base version, class, class
	 * version, method, then the transaction ID at 8.
	 */
	pk.mad[0] = 1;
	pk.mad[1] = MAD_CLASS;
	pk.mad[2] = 1;
	pk.mad[3] = MAD_METHOD_GET;
	pk.mad[15] = 0x42;
	memcpy(&pk.mad[24], MARKER, sizeof(MARKER));
	if (write(fd, &pk, sizeof(pk)) != sizeof(pk)) {
		perror("write MAD");
		return 1;
	}
	printf("HICAIN-MAD-SENT\n");
	return 0;
}

/* PerfMgt (IBA 16.1.2): attributes, data at MAD offset 64. */
#define PMA_CLASS		0x04
#define PMA_METHOD_SET		0x02
#define PMA_METHOD_GET_RESP	0x81
#define PMA_CLASS_PORT_INFO	0x0001
#define PMA_PORT_SAMPLES_CONTROL 0x0010
#define PMA_PORT_COUNTERS	0x0012
#define PMA_PORT_COUNTERS_EXT	0x001D
#define PMA_DATA		64
#define PMA_STATUS_UNSUP_ATTR	0x000c
/* PortCounters CounterSelect: PortXmitData, PortRcvData, PortXmitPkts,
 * PortRcvPkts (IBA table 247).
 */
#define PMA_SEL_DATA_PKTS	0xf000

static uint16_t be16_at(const unsigned char *p)
{
	return p[0] << 8 | p[1];
}

static uint32_t be32_at(const unsigned char *p)
{
	return (uint32_t)be16_at(p) << 16 | be16_at(p + 2);
}

static uint64_t be64_at(const unsigned char *p)
{
	return (uint64_t)be32_at(p) << 32 | be32_at(p + 4);
}

/*
 * pma_call - send one PerfMgt request to dgid's QP1 and wait for its
 * response (umad matches it by transaction ID; 2 s, 3 retries). Returns
 * the response's MAD status, or -1.
 */
static int pma_call(int fd, const char *dgid, uint8_t method, uint16_t attr,
		    const unsigned char *data, size_t len, struct packet *resp)
{
	static uint32_t tid = 0x100;
	struct packet pk;
	struct pollfd p;
	ssize_t n;

	memset(&pk, 0, sizeof(pk));
	if (inet_pton(AF_INET6, dgid, pk.hdr.gid) != 1) {
		fprintf(stderr, "bad GID %s\n", dgid);
		return -1;
	}
	pk.hdr.qpn = htonl(1);
	pk.hdr.qkey = htonl(GSI_QKEY);
	pk.hdr.grh_present = 1;
	pk.hdr.gid_index = 0;		/* link-local, see above */
	pk.hdr.hop_limit = 64;
	pk.hdr.timeout_ms = 2000;
	pk.hdr.retries = 3;
	pk.mad[0] = 1;
	pk.mad[1] = PMA_CLASS;
	pk.mad[2] = 1;
	pk.mad[3] = method;
	tid++;
	pk.mad[12] = tid >> 24;
	pk.mad[13] = tid >> 16;
	pk.mad[14] = tid >> 8;
	pk.mad[15] = tid;
	pk.mad[16] = attr >> 8;
	pk.mad[17] = attr;
	memcpy(&pk.mad[PMA_DATA], data, len);
	if (write(fd, &pk, sizeof(pk)) != sizeof(pk)) {
		perror("write PMA request");
		return -1;
	}
	p.fd = fd;
	p.events = POLLIN;
	if (poll(&p, 1, 20000) != 1) {
		fprintf(stderr, "attribute 0x%04x: no answer within 20 s\n", attr);
		return -1;
	}
	n = read(fd, resp, sizeof(*resp));
	if (n < (ssize_t)sizeof(resp->hdr)) {
		fprintf(stderr, "read: %zd bytes: %s\n", n, n < 0 ? strerror(errno) : "short");
		return -1;
	}
	/* A request that got no answer comes back with an errno. */
	if (resp->hdr.status) {
		fprintf(stderr, "attribute 0x%04x: request failed: %s\n", attr, strerror(resp->hdr.status));
		return -1;
	}
	if (n != sizeof(*resp)) {
		fprintf(stderr, "read: %zd bytes, want %zu\n", n, sizeof(*resp));
		return -1;
	}
	if (resp->mad[1] != PMA_CLASS || resp->mad[3] != PMA_METHOD_GET_RESP ||
	    be32_at(&resp->mad[12]) != tid || be16_at(&resp->mad[16]) != attr) {
		fprintf(stderr, "attribute 0x%04x: response class 0x%02x method 0x%02x tid %08x attr 0x%04x\n",
			attr, resp->mad[1], resp->mad[3], be32_at(&resp->mad[12]), be16_at(&resp->mad[16]));
		return -1;
	}
	return be16_at(&resp->mad[4]);
}

struct pma_pc {
	int status;
	uint32_t xmit_data, rcv_data, xmit_pkts, rcv_pkts;
};

/* PortCounters (IBA 16.1.3.5): a Get, or a Set that clears sel. */
static struct pma_pc pma_port_counters(int fd, const char *dgid, const char *name, uint16_t sel)
{
	unsigned char req[4] = { 0, 1, sel >> 8, sel };	/* PortSelect 1 */
	struct pma_pc c = { 0 };
	struct packet r;
	const unsigned char *d = &r.mad[PMA_DATA];

	c.status = pma_call(fd, dgid, sel ? PMA_METHOD_SET : MAD_METHOD_GET, PMA_PORT_COUNTERS,
			    req, sizeof(req), &r);
	if (c.status < 0)
		return c;
	c.xmit_data = be32_at(d + 24);
	c.rcv_data = be32_at(d + 28);
	c.xmit_pkts = be32_at(d + 32);
	c.rcv_pkts = be32_at(d + 36);
	printf("HICAIN-PMA-%s status=0x%04x port=%u select=0x%04x xmit_data=%" PRIu32 " rcv_data=%" PRIu32
	       " xmit_pkts=%" PRIu32 " rcv_pkts=%" PRIu32 " rcv_errors=%u xmit_discards=%u\n",
	       name, c.status, d[1], be16_at(d + 2), c.xmit_data, c.rcv_data, c.xmit_pkts, c.rcv_pkts,
	       be16_at(d + 8), be16_at(d + 14));
	return c;
}

struct pma_pcx {
	int status;
	uint64_t xmit_data, rcv_data, xmit_pkts, rcv_pkts;
};

/* PortCountersExtended (IBA 16.1.4.11), a Get. */
static struct pma_pcx pma_port_counters_ext(int fd, const char *dgid, const char *name)
{
	unsigned char req[2] = { 0, 1 };
	struct pma_pcx c = { 0 };
	struct packet r;
	const unsigned char *d = &r.mad[PMA_DATA];

	c.status = pma_call(fd, dgid, MAD_METHOD_GET, PMA_PORT_COUNTERS_EXT, req, sizeof(req), &r);
	if (c.status < 0)
		return c;
	c.xmit_data = be64_at(d + 8);
	c.rcv_data = be64_at(d + 16);
	c.xmit_pkts = be64_at(d + 24);
	c.rcv_pkts = be64_at(d + 32);
	printf("HICAIN-PMA-%s status=0x%04x xmit_data=%" PRIu64 " rcv_data=%" PRIu64 " xmit_pkts=%" PRIu64
	       " rcv_pkts=%" PRIu64 " ucast_xmit=%" PRIu64 " ucast_rcv=%" PRIu64 " mcast_xmit=%" PRIu64
	       " mcast_rcv=%" PRIu64 "\n", name, c.status, c.xmit_data, c.rcv_data, c.xmit_pkts, c.rcv_pkts,
	       be64_at(d + 40), be64_at(d + 48), be64_at(d + 56), be64_at(d + 64));
	return c;
}

static int do_pma(const char *dgid)
{
	struct pma_pc pc, set, pc2;
	struct pma_pcx pcx, pcx2;
	unsigned char none[1] = { 0 };
	struct packet r;
	int fd = open_agent(0), st, bad = 0;

	if (fd < 0)
		return 1;
	st = pma_call(fd, dgid, MAD_METHOD_GET, PMA_CLASS_PORT_INFO, none, 0, &r);
	if (st < 0)
		return 1;
	printf("HICAIN-PMA-CPI status=0x%04x cap=0x%04x resp_time=%u\n", st, be16_at(&r.mad[PMA_DATA + 2]),
	       r.mad[PMA_DATA + 7] & 0x1f);
	bad |= st != 0;
	pc = pma_port_counters(fd, dgid, "PC", 0);
	pcx = pma_port_counters_ext(fd, dgid, "PCX");
	set = pma_port_counters(fd, dgid, "SET", PMA_SEL_DATA_PKTS);
	pc2 = pma_port_counters(fd, dgid, "PC2", 0);
	pcx2 = pma_port_counters_ext(fd, dgid, "PCX2");
	st = pma_call(fd, dgid, MAD_METHOD_GET, PMA_PORT_SAMPLES_CONTROL, none, 0, &r);
	printf("HICAIN-PMA-UNSUPPORTED status=0x%04x\n", st);
	bad |= st != PMA_STATUS_UNSUP_ATTR;
	bad |= pc.status || pcx.status || set.status || pc2.status || pcx2.status;
	/* After the traffic: data both ways. The Set cleared what it
	 * selected (only the MADs since count), not the extended counters.
	 */
	bad |= !pc.xmit_data || !pc.rcv_data || !pc.xmit_pkts || !pc.rcv_pkts;
	bad |= pcx.xmit_data < pc.xmit_data || pcx.rcv_pkts < pc.rcv_pkts;
	bad |= set.xmit_data >= pc.xmit_data || pc2.xmit_data >= pc.xmit_data || pc2.rcv_pkts >= pc.rcv_pkts;
	bad |= pcx2.xmit_data < pcx.xmit_data || pcx2.rcv_pkts < pcx.rcv_pkts;
	return bad;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "listen"))
		return do_listen();
	if (argc == 3 && !strcmp(argv[1], "send"))
		return do_send(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "pma"))
		return do_pma(argv[2]);
	fprintf(stderr, "usage: umad_ping listen | send GID | pma GID\n");
	return 2;
}
