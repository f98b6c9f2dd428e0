package verify

import (
	"strings"
	"testing"
)

// TestMulticastBW: a HiNIC run whose 500 datagrams reached the member in
// a burst (its row: 1283 MB/s, the sender's 163 MB/s) counts at the rate
// they were sent; either side alone stands in for the other.
func TestMulticastBW(t *testing.T) {
	srv := readFixture(t, "testdata/hicain/ud_multicast_burst.server.txt")
	cli := readFixture(t, "testdata/hicain/ud_multicast_burst.client.txt")
	sb, err := ParseBW(srv)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := ParseBW(cli)
	if err != nil {
		t.Fatal(err)
	}
	if sb.AverageMiBs < 5*cb.AverageMiBs {
		t.Fatalf("fixture: receiver %.1f, sender %.1f MiB/s: not the burst this test is about", sb.AverageMiBs, cb.AverageMiBs)
	}
	b, sides, err := multicastBW(srv, cli)
	if err != nil || b != cb {
		t.Fatalf("multicastBW = %+v, %v; want the sender's row %+v", b, err, cb)
	}
	if !strings.Contains(sides, "received 1283.0 MiB/s") || !strings.Contains(sides, "sent 163.1 MiB/s") {
		t.Errorf("sides %q name neither figure", sides)
	}
	if b, _, err := multicastBW(srv, "no row"); err != nil || b != sb {
		t.Errorf("receiver alone: %+v, %v", b, err)
	}
	if b, _, err := multicastBW("", cli); err != nil || b != cb {
		t.Errorf("sender alone: %+v, %v", b, err)
	}
	if _, _, err := multicastBW("", ""); err == nil {
		t.Error("no row on either side passed")
	}
}
