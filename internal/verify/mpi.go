package verify

import (
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The gate's MPI programs, built in the guests with mpicc.
var (
	//go:embed mpi/pingpong.c
	mpiPingpongSrc string
	//go:embed mpi/allreduce.c
	mpiAllreduceSrc string
)

const (
	mpiDir = "/tmp/hinic-mpi"
	// GuestHostfile is where deploy writes the rack's Open MPI hostfile
	// (deploy.GuestHostfile; verify does not import deploy).
	guestHostfile = "/etc/hinic/hostfile"
)

// MPIPingPong is hinic-mpi-pingpong's output: one row per size.
type MPIPingPong struct {
	Rows []MPIPingPongRow
}

// MPIPingPongRow is one message size.
type MPIPingPongRow struct {
	Bytes  int64
	Iters  int
	LatUS  float64
	BWMiBs float64
}

var (
	mpiPPRow = regexp.MustCompile(`(?m)^pingpong bytes=(\d+) iters=(\d+) lat_us=([0-9.]+) bw_mibs=([0-9.]+)\s*$`)
	mpiARRow = regexp.MustCompile(`(?m)^allreduce count=(\d+) bytes=(\d+) iters=(\d+) us=([0-9.]+) busbw_mibs=([0-9.]+)\s*$`)
	mpiPPBad = regexp.MustCompile(`(?m)^pingpong MISMATCH.*$`)
	mpiARBad = regexp.MustCompile(`(?m)^allreduce (MISMATCH|FAILED).*$`)
)

// mpiVerdict is the error of an MPI program's output, or nil: its first
// line of bad, else no rows, else no final "PROG ok" line (the run did
// not finish).
func mpiVerdict(out, prog string, bad *regexp.Regexp, rows int) error {
	if m := bad.FindString(out); m != "" {
		return fmt.Errorf("%s", m)
	}
	if rows == 0 {
		return fmt.Errorf("no %s rows in the output", prog)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == prog+" ok" {
			return nil
		}
	}
	return fmt.Errorf("no \"%s ok\": the run did not finish", prog)
}

// ParseMPIPingPong reads hinic-mpi-pingpong's output. It fails unless the
// program said "pingpong ok" (every byte of every message checked) and
// printed at least one size.
func ParseMPIPingPong(out string) (MPIPingPong, error) {
	var p MPIPingPong
	for _, m := range mpiPPRow.FindAllStringSubmatch(out, -1) {
		var r MPIPingPongRow
		r.Bytes, _ = strconv.ParseInt(m[1], 10, 64)
		r.Iters, _ = strconv.Atoi(m[2])
		r.LatUS, _ = strconv.ParseFloat(m[3], 64)
		r.BWMiBs, _ = strconv.ParseFloat(m[4], 64)
		p.Rows = append(p.Rows, r)
	}
	return p, mpiVerdict(out, "pingpong", mpiPPBad, len(p.Rows))
}

// MPIAllreduce is hinic-mpi-allreduce's output: one row per count.
type MPIAllreduce struct {
	Rows []MPIAllreduceRow
}

// MPIAllreduceRow is one vector length.
type MPIAllreduceRow struct {
	Count, Bytes int64
	Iters        int
	US           float64
	BusBWMiBs    float64
}

// ParseMPIAllreduce reads hinic-mpi-allreduce's output. It fails unless
// every rank's every element matched ("allreduce ok").
func ParseMPIAllreduce(out string) (MPIAllreduce, error) {
	var a MPIAllreduce
	for _, m := range mpiARRow.FindAllStringSubmatch(out, -1) {
		var r MPIAllreduceRow
		r.Count, _ = strconv.ParseInt(m[1], 10, 64)
		r.Bytes, _ = strconv.ParseInt(m[2], 10, 64)
		r.Iters, _ = strconv.Atoi(m[3])
		r.US, _ = strconv.ParseFloat(m[4], 64)
		r.BusBWMiBs, _ = strconv.ParseFloat(m[5], 64)
		a.Rows = append(a.Rows, r)
	}
	return a, mpiVerdict(out, "allreduce", mpiARBad, len(a.Rows))
}

// commonPrefix is the smallest IPv4 network holding both addresses:
// Open MPI's out-of-band and TCP traffic is kept on it, away from the
// management NIC (QEMU user networking gives every guest the same
// address there).
func commonPrefix(a, b string) (string, error) {
	x, err := netip.ParseAddr(a)
	if err != nil {
		return "", err
	}
	y, err := netip.ParseAddr(b)
	if err != nil {
		return "", err
	}
	if !x.Is4() || !y.Is4() {
		return "", fmt.Errorf("%s and %s are not both IPv4", a, b)
	}
	xa, ya := x.As4(), y.As4()
	xv := uint32(xa[0])<<24 | uint32(xa[1])<<16 | uint32(xa[2])<<8 | uint32(xa[3])
	yv := uint32(ya[0])<<24 | uint32(ya[1])<<16 | uint32(ya[2])<<8 | uint32(ya[3])
	bits := 32
	for bits > 0 && xv>>(32-bits) != yv>>(32-bits) {
		bits--
	}
	p, err := x.Prefix(bits)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// mpiBuild writes the gate's MPI programs into both guests and builds them
// with mpicc, once per gate run.
func (g *sshGate) mpiBuild(ctx context.Context) error {
	if g.mpiBuilt {
		return nil
	}
	var b strings.Builder
	b.WriteString("set -e\ncommand -v mpicc >/dev/null || { echo 'no mpicc: install libopenmpi-dev'; exit 2; }\n")
	b.WriteString("command -v gcc >/dev/null || { echo 'mpicc needs gcc: install gcc'; exit 2; }\n")
	b.WriteString("mkdir -p " + mpiDir + "\n")
	for name, src := range map[string]string{"pingpong": mpiPingpongSrc, "allreduce": mpiAllreduceSrc} {
		fmt.Fprintf(&b, "cat > %s/%s.c <<'HINIC_EOF'\n%sHINIC_EOF\n", mpiDir, name, src)
		fmt.Fprintf(&b, "mpicc -O2 -Wall -o %s/%s %s/%s.c\n", mpiDir, name, mpiDir, name)
	}
	script := b.String()
	errs := make(chan error, 2)
	for _, h := range []Host{g.srv, g.cli} {
		go func() {
			out, err := h.Run(ctx, script)
			if err != nil {
				err = fmt.Errorf("%s: building the MPI programs: %s", h.Name(), lastLines(out, 4))
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	g.mpiBuilt = true
	return nil
}

// mpirun runs an MPI program on the server and the client guests, one
// rank each, started from the server over ssh with the rack's hostfile,
// through UCX on the RDMA device.
func (g *sshGate) mpirun(ctx context.Context, name, prog string) (string, error) {
	if err := g.mpiBuild(ctx); err != nil {
		return "", err
	}
	net, err := commonPrefix(g.srv.DataIP(), g.cli.DataIP())
	if err != nil {
		return "", err
	}
	ucxDev := ""
	if g.srv.Device() == g.cli.Device() {
		ucxDev = " -x UCX_NET_DEVICES=" + g.srv.Device() + ":1"
	}
	secs := int(g.o.Timeout.Seconds())
	cmd := fmt.Sprintf(`set -e
test -s %[1]s || { echo "no %[1]s: deploy writes it"; exit 2; }
hosts=$(mktemp /tmp/hinic-mpi-hosts.XXXXXX)
trap 'rm -f "$hosts"' EXIT
grep -E '^(%[2]s|%[3]s) ' %[1]s > "$hosts" || { echo "%[1]s lacks %[2]s or %[3]s"; exit 2; }
timeout -s KILL %[4]d mpirun --allow-run-as-root -np 2 --hostfile "$hosts" --map-by node \
  --mca pml ucx --mca osc ucx --mca btl ^openib --mca oob_tcp_if_include %[5]s --mca btl_tcp_if_include %[5]s%[6]s \
  %[7]s 2>&1`, guestHostfile, regexp.QuoteMeta(g.srv.Name()), regexp.QuoteMeta(g.cli.Name()), secs, net, ucxDev, prog)
	rctx, cancel := context.WithTimeout(ctx, g.o.Timeout+30*time.Second)
	defer cancel()
	out, err := g.srv.Run(rctx, cmd)
	g.save(name, "server", out)
	if err != nil {
		return out, fmt.Errorf("mpirun: %v: %s", err, lastLines(out, 4))
	}
	return out, nil
}

// mpiPingPong runs hinic-mpi-pingpong once; its two cases share the run.
func (g *sshGate) mpiPingPong(ctx context.Context) (MPIPingPong, error) {
	if !g.mpiPPDone {
		g.mpiPPDone = true
		out, err := g.mpirun(ctx, "mpi_pingpong", fmt.Sprintf("%s/pingpong %d %d", mpiDir, g.o.MPIIters, g.o.MPIMaxBytes))
		if err == nil {
			g.mpiPP, err = ParseMPIPingPong(out)
		}
		g.mpiPPErr = err
	}
	return g.mpiPP, g.mpiPPErr
}

// mpiLat is the ping-pong's smallest message: half the round trip.
func (g *sshGate) mpiLat(ctx context.Context) (Outcome, error) {
	p, err := g.mpiPingPong(ctx)
	if err != nil {
		return Outcome{}, err
	}
	r := p.Rows[0]
	// The one run happens in this case, so its host CPU is metered here:
	// the bytes are the whole run's.
	return Outcome{Figure: r.LatUS, Unit: "µs", Bytes: ppMoved(p),
		Detail: fmt.Sprintf("MPI_Send/MPI_Recv over pml ucx, %d B x %d, every byte checked; %s", r.Bytes, r.Iters, ppSizes(p, true))}, nil
}

// mpiBW is the ping-pong's largest message: bytes each way per half
// round trip.
func (g *sshGate) mpiBW(ctx context.Context) (Outcome, error) {
	p, err := g.mpiPingPong(ctx)
	if err != nil {
		return Outcome{}, err
	}
	r := p.Rows[len(p.Rows)-1]
	return Outcome{Figure: r.BWMiBs, Unit: "MiB/s",
		Detail: fmt.Sprintf("MPI ping-pong over pml ucx, %d B x %d, every byte checked (the run of mpi_pingpong_lat, which has its host CPU); %s",
			r.Bytes, r.Iters, ppSizes(p, false))}, nil
}

// ppMoved is what a ping-pong run moved, both ways.
func ppMoved(p MPIPingPong) int64 {
	var moved int64
	for _, row := range p.Rows {
		moved += 2 * row.Bytes * int64(row.Iters)
	}
	return moved
}

func ppSizes(p MPIPingPong, lat bool) string {
	var parts []string
	for _, r := range p.Rows {
		if lat {
			parts = append(parts, fmt.Sprintf("%s %.1f µs", sizeName(r.Bytes), r.LatUS))
		} else {
			parts = append(parts, fmt.Sprintf("%s %.1f MiB/s", sizeName(r.Bytes), r.BWMiBs))
		}
	}
	return strings.Join(parts, ", ")
}

func sizeName(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// mpiAllreduce runs hinic-mpi-allreduce: its figure is the bus bandwidth
// of the largest vector.
func (g *sshGate) mpiAllreduce(ctx context.Context) (Outcome, error) {
	out, err := g.mpirun(ctx, "mpi_allreduce", fmt.Sprintf("%s/allreduce %d %d", mpiDir, g.o.MPIIters/5+1, g.o.MPIMaxBytes/8/4))
	if err != nil {
		return Outcome{}, err
	}
	a, err := ParseMPIAllreduce(out)
	if err != nil {
		return Outcome{}, err
	}
	first, last := a.Rows[0], a.Rows[len(a.Rows)-1]
	var moved int64
	for _, r := range a.Rows {
		// Each rank sends and receives about its vector once.
		moved += 2 * r.Bytes * int64(r.Iters)
	}
	return Outcome{Figure: last.BusBWMiBs, Unit: "MiB/s", Bytes: moved,
		Detail: fmt.Sprintf("MPI_Allreduce SUM (and MAX) of int64 over pml ucx, 2 ranks, every element checked on every rank; %d elements %.1f µs, %d elements %.1f µs",
			first.Count, first.US, last.Count, last.US)}, nil
}

// lastLines is the last n lines of s, joined with " | ".
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	for i := range l {
		l[i] = strings.TrimSpace(l[i])
	}
	return strings.Join(l, " | ")
}
