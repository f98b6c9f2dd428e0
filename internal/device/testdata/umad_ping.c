// SPDX-License-Identifier: GPL-2.0
/*
 * umad_ping - one MAD from one guest's QP1 to the other's, through
 * ib_umad and ib_mad (the kernel GSI QP of the device).
 *
 *   umad_ping listen          wait up to 30 s for a vendor MAD, print it
 *   umad_ping send GID        send one to the QP1 of the port with GID
 *
 * The MAD is a Get of vendor class 0x09 (IBTA vol. 1 13.4.4: range 1,
 * no OUI), addressed with a GRH to the peer's RoCE v2 GID (our GID
 * index 1), QP1 and the GSI Q_Key. Its data carries a marker the
 * listener checks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "listen"))
		return do_listen();
	if (argc == 3 && !strcmp(argv[1], "send"))
		return do_send(argv[2]);
	fprintf(stderr, "usage: umad_ping listen | send GID\n");
	return 2;
}
