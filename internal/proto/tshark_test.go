package proto

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/testutil"
)

// TestTsharkDissectsOurFrames builds every opcode on every encapsulation
// with our encoders and checks that tshark dissects each frame without
// "Malformed" and reads the same opcode, destination QP and PSN.
func TestTsharkDissectsOurFrames(t *testing.T) {
	tshark := testutil.Tshark(t)
	for _, tc := range []struct {
		name string
		lt   uint32
		encs []int // indexes into encapsulations
	}{
		{"ethernet", 1, []int{0, 1, 2, 3}},
		{"infiniband", testutil.LinkTypeUser0, []int{4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var frames [][]byte
			var want []BTHFields
			for _, e := range tc.encs {
				for _, op := range validOpcodes() {
					f := samplePacket(op, 37)
					encapsulations[e].set(&f)
					f.BTH.PSN = PSN(len(frames) * 1000)
					frames = append(frames, encode(t, &f))
					want = append(want, f.BTH)
				}
			}
			if tc.lt == 1 {
				pfc := make([]byte, EthernetMinFrameSize)
				if _, err := BuildPFC(pfc, [6]byte{2, 0, 0, 0, 0, 1}, &PFCFields{Enable: 8, Time: [8]uint16{3: 0xFFFF}}); err != nil {
					t.Fatal(err)
				}
				frames = append(frames, pfc)
			}
			path := filepath.Join(t.TempDir(), tc.name+".pcap")
			testutil.WritePcap(t, path, tc.lt, frames)

			verbose := testutil.RunTshark(t, tshark, append(append([]string{}, testutil.TsharkArgs...), "-r", path, "-V")...)
			if strings.Contains(verbose, "Malformed") {
				t.Fatalf("tshark reports a malformed frame:\n%s", excerpt(verbose, "Malformed"))
			}
			fields := testutil.RunTshark(t, tshark, append(append([]string{}, testutil.TsharkArgs...), "-r", path, "-T", "fields",
				"-e", "frame.number", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
				"-e", "infiniband.bth.psn")...)
			rows := strings.Split(strings.TrimSpace(fields), "\n")
			if len(rows) != len(frames) {
				t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
			}
			for i, row := range rows {
				col := strings.Split(row, "\t")
				if i >= len(want) { // the PFC frame
					if !strings.Contains(verbose, "Class Enable Vector: 0x0008") {
						t.Errorf("PFC frame: enable vector not dissected (%q)", row)
					}
					continue
				}
				w := want[i]
				got := fmt.Sprintf("%s %s %s", col[1], col[2], col[3])
				exp := fmt.Sprintf("%d 0x%06x %d", w.Opcode, w.DestQP, w.PSN)
				if got != exp {
					t.Errorf("frame %d (%v): tshark read %q, want %q", i+1, w.Opcode, got, exp)
				}
			}
		})
	}
}

// excerpt returns the lines around the first occurrence of word.
func excerpt(s, word string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.Contains(l, word) {
			lo := max(0, i-30)
			return strings.Join(lines[lo:min(len(lines), i+3)], "\n")
		}
	}
	return ""
}
