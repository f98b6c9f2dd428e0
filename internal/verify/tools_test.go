package verify

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Output samples of perftest 4.5 and the rdma-core 44 pingpong tools from
// real runs on rxe0 under TCG. perftest rows
// contain tabs.

const rcPingPong = `  local address:  LID 0x0000, QPN 0x000012, PSN 0x8b06a6, GID ::ffff:169.254.10.2
  remote address: LID 0x0000, QPN 0x000012, PSN 0x250243, GID ::ffff:169.254.10.1
1638400 bytes in 9.66 seconds = 1.36 Mbit/sec
200 iters in 9.66 seconds = 48320.68 usec/iter
`

const udPingPong = `  local address:  LID 0x0000, QPN 0x000011, PSN 0x1a2b3c: GID ::ffff:10.42.0.2
  remote address: LID 0x0000, QPN 0x000011, PSN 0x4d5e6f, GID ::ffff:10.42.0.1
2048000 bytes in 1.30 seconds = 12.60 Mbit/sec
1000 iters in 1.30 seconds = 1299.00 usec/iter
`

const writeBW = "---------------------------------------------------------------------------------------\n" +
	"                    RDMA_Write BW Test\n" +
	" Dual-port       : OFF\t\tDevice         : rxe0\n" +
	" PCIe relax order: Unsupported\n" +
	"---------------------------------------------------------------------------------------\n" +
	" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
	" 65536      50               7.03               6.53\t\t   0.000104\n" +
	"---------------------------------------------------------------------------------------\n"

const sendLat = "---------------------------------------------------------------------------------------\n" +
	" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
	" 2       1000          512.11         9120.50      730.60     \t991.30      \t412.20 \t\t4287.00 \t\t8000.10 \n" +
	"---------------------------------------------------------------------------------------\n"

const devinfo = `hca_id:	rxe0
	transport:			InfiniBand (0)
	fw_ver:				0.0.0
	node_guid:			5054:00ff:fe42:0001
	vendor_id:			0xffffff
	phys_port_cnt:			1
		port:	1
			state:			PORT_ACTIVE (4)
			max_mtu:		4096 (5)
			active_mtu:		1024 (3)
			link_layer:		Ethernet
			GID[  0]:		fe80:0000:0000:0000:5054:00ff:fe42:0001, RoCE v2
			GID[  1]:		::ffff:10.42.0.1, RoCE v2
`

const devices = `    device          	   node GUID
    ------          	----------------
    rxe0            	505400fffe420001
`

func TestParsePingPong(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		usec  float64
		iters int64
		mbit  float64
	}{
		{"rc", rcPingPong, 48320.68, 200, 1.36},
		{"ud local line with colon", udPingPong, 1299.00, 1000, 12.60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePingPong(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.USecPerIter != tc.usec || p.Iters != tc.iters || p.MbitPerSec != tc.mbit {
				t.Errorf("got %+v", p)
			}
		})
	}
	if _, err := ParsePingPong("Couldn't connect to 10.42.0.1:18515\n"); !errors.Is(err, ErrNoResult) {
		t.Errorf("failed run: err %v, want ErrNoResult", err)
	}
}

func TestParseBW(t *testing.T) {
	b, err := ParseBW(writeBW)
	if err != nil {
		t.Fatal(err)
	}
	want := BW{Bytes: 65536, Iters: 50, PeakMiBs: 7.03, AverageMiBs: 6.53, MsgRateMpps: 0.000104}
	if b != want {
		t.Errorf("got %+v, want %+v", b, want)
	}
	if _, err := ParseBW(sendLat); !errors.Is(err, ErrNoResult) {
		t.Errorf("latency table as BW: err %v", err)
	}
	// 8-byte atomics at 532 op/s print an average of 0.00 MB/s: the
	// message rate is the figure then. With both zero, nothing moved.
	slow := strings.Replace(strings.Replace(writeBW, " 65536      50               7.03               6.53\t\t   0.000104",
		" 8          100              0.00               0.00\t\t   0.000532", 1), "RDMA_Write", "Atomic FETCH_AND_ADD", 1)
	if b, err := ParseBW(slow); err != nil || b.MsgRateMpps != 0.000532 || b.AverageMiBs != 0 {
		t.Errorf("slow atomics: %+v, %v", b, err)
	}
	if _, err := ParseBW(strings.Replace(slow, "0.000532", "0.000000", 1)); err == nil {
		t.Error("a row with no bandwidth and no message rate was accepted")
	}
}

func TestParseLat(t *testing.T) {
	l, err := ParseLat(sendLat)
	if err != nil {
		t.Fatal(err)
	}
	if l.Bytes != 2 || l.Iters != 1000 || l.Typical != 730.60 || l.Avg != 991.30 || l.P99 != 4287.00 || l.P999 != 8000.10 {
		t.Errorf("got %+v", l)
	}
	if _, err := ParseLat(writeBW); !errors.Is(err, ErrNoResult) {
		t.Errorf("BW table as latency: err %v", err)
	}
	// A NaN standard deviation (perftest's sqrt of a rounded-negative
	// variance) leaves the figures; a NaN typical does not.
	nanDev := strings.Replace(sendLat, "412.20", "-nan", 1)
	if l, err := ParseLat(nanDev); err != nil || l.Typical != 730.60 || !math.IsNaN(l.Stdev) {
		t.Errorf("-nan stdev: %+v, %v", l, err)
	}
	if _, err := ParseLat(strings.Replace(sendLat, "730.60", "-nan", 1)); err == nil {
		t.Error("a NaN typical latency was accepted")
	}
}

func TestParseDevinfo(t *testing.T) {
	ports := ParseDevinfo(devinfo)
	if len(ports) != 1 || ports[0].State != "PORT_ACTIVE" || ports[0].Link != "Ethernet" || len(ports[0].GIDs) != 2 ||
		ports[0].MaxMTU != 4096 || ports[0].ActiveMTU != 1024 {
		t.Fatalf("got %+v", ports)
	}
	i, err := RoCEv2GID(ports[0].GIDs, "10.42.0.1")
	if err != nil || i != 1 {
		t.Errorf("RoCEv2GID = %d, %v; want 1", i, err)
	}
	if i := RoCEv2LinkLocalGID(ports[0].GIDs); i != 0 {
		t.Errorf("RoCEv2LinkLocalGID = %d, want 0", i)
	}
	if _, err := RoCEv2GID(ports[0].GIDs, "10.42.0.2"); err == nil {
		t.Error("found a GID for an address the port does not have")
	}
}

func TestParseDevices(t *testing.T) {
	if d := ParseDevices(devices); len(d) != 1 || d[0] != "rxe0" {
		t.Errorf("got %v", d)
	}
}

func TestUnsupportedIf(t *testing.T) {
	base := errors.New("client: exit 1")
	if err := unsupportedIf(base, writeBW+"Couldn't connect\n"); errors.Is(err, ErrUnsupported) {
		t.Error("perftest header's 'PCIe relax order: Unsupported' made a failure unsupported")
	}
	if err := unsupportedIf(base, "Atomic operations not supported by the device\n"); !errors.Is(err, ErrUnsupported) {
		t.Error("a device without the feature was reported as failing")
	}
}

// TestParseRealOutputs parses tool outputs saved from a real run on the
// Soft-RoCE rack (testdata/rxe).
func TestParseRealOutputs(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "rxe", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		file  string
		usec  float64
		iters int64
	}{
		{"ibv_rc_pingpong.client.txt", 3725.82, 500},
		{"ibv_ud_pingpong.client.txt", 1549.1, 500},
		{"ibv_srq_pingpong.client.txt", 1476.99, 500},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p, err := ParsePingPong(read(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if p.USecPerIter != tc.usec || p.Iters != tc.iters {
				t.Errorf("got %+v", p)
			}
		})
	}
	for _, tc := range []struct {
		file string
		avg  float64
		rate float64
	}{
		{"ib_write_bw.client.txt", 4.90, 0},
		{"ib_read_bw.client.txt", 6.55, 0},
		{"ib_atomic_bw.client.txt", 0.02, 0.002581},
		{"ud_multicast.server.txt", 0, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := ParseBW(read(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if (tc.avg != 0 && b.AverageMiBs != tc.avg) || (tc.rate != 0 && b.MsgRateMpps != tc.rate) || b.Iters != 500 && b.Iters != 1000 {
				t.Errorf("got %+v", b)
			}
		})
	}
	for _, tc := range []struct {
		file    string
		typical float64
	}{
		{"ib_send_lat.client.txt", 2721.65},
		{"ib_read_lat.client.txt", 2343.57},
		{"ib_atomic_lat.client.txt", 1512.21},
	} {
		t.Run(tc.file, func(t *testing.T) {
			l, err := ParseLat(read(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if l.Typical != tc.typical || l.Iters != 500 {
				t.Errorf("got %+v", l)
			}
		})
	}
	ports := ParseDevinfo(read("ibv_devinfo.vm-a.txt"))
	if len(ports) != 1 || ports[0].State != "PORT_ACTIVE" {
		t.Fatalf("devinfo: %+v", ports)
	}
	if i, err := RoCEv2GID(ports[0].GIDs, "10.42.0.1"); i != 1 || err != nil {
		t.Errorf("IPv4 GID %d %v", i, err)
	}
	if i := RoCEv2LinkLocalGID(ports[0].GIDs); i != 0 {
		t.Errorf("link-local GID %d", i)
	}
	if d := ParseDevices(read("ibv_devices.vm-a.txt")); len(d) != 1 || d[0] != "rxe0" {
		t.Errorf("devices %v", d)
	}
	if _, err := ParseBW(read("ud_multicast_ipv4gid.client.txt")); !errors.Is(err, ErrNoResult) {
		t.Errorf("refused multicast run: %v", err)
	}
}

func TestParseLatClockCalibration(t *testing.T) {
	// A real ib_send_lat server in a TCG guest whose cycle counter
	// calibration failed: the exchange ran, the figures are infinite.
	b, err := os.ReadFile("testdata/hicain/ib_send_lat.calibration.server.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseLat(string(b)); !errors.Is(err, ErrClockCalibration) {
		t.Fatalf("err %v, want ErrClockCalibration", err)
	}
	// Infinite figures without perftest's warning are an error too, not
	// a result.
	noWarn := strings.ReplaceAll(string(b), "Correlation coefficient r^2: 0.83107 < 0.9\n", "")
	noWarn = strings.ReplaceAll(noWarn, "-nan", "inf")
	if _, err := ParseLat(noWarn); err == nil || errors.Is(err, ErrClockCalibration) {
		t.Fatalf("infinite row without the warning: err %v", err)
	}
}

func TestParseBWClockCalibration(t *testing.T) {
	// ib_send_bw -R between rxe guests under TCG: the calibration failed
	// and every figure reads 0.00.
	b, err := os.ReadFile("testdata/rxe/ib_send_bw_rdma_cm.calibration.client.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseBW(string(b)); !errors.Is(err, ErrClockCalibration) {
		t.Fatalf("err %v, want ErrClockCalibration", err)
	}
	noWarn := strings.Replace(string(b), "Correlation coefficient r^2: 0.876388 < 0.9\n", "", 1)
	if _, err := ParseBW(noWarn); err == nil || errors.Is(err, ErrClockCalibration) {
		t.Fatalf("zero bandwidth without the warning: err %v", err)
	}
}

// FuzzParseDevinfo: ibv_devinfo's output comes from a guest; any text
// parses without a panic, into ports whose MTUs are what the text said
// (0 when a number is out of range).
func FuzzParseDevinfo(f *testing.F) {
	f.Add(devinfo)
	f.Add("port: 1\n active_mtu: 99999999999999999999 (5)\n")
	f.Add("\tport:\t1\n\t\tmax_mtu:\t\t4096 (5)\n\t\tGID[  0]:\t::ffff:10.42.0.1, RoCE v2\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, p := range ParseDevinfo(out) {
			for _, mtu := range []int{p.MaxMTU, p.ActiveMTU} {
				if mtu < 0 || mtu > 0 && !strings.Contains(out, strconv.Itoa(mtu)) {
					t.Fatalf("MTU %d from %q: %+v", mtu, out, p)
				}
			}
		}
	})
}
