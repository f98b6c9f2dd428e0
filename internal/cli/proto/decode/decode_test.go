package decode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// run runs hinic with args and returns stdout, stderr and the exit code.
func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ios, in, out, errOut := cmdutil.Test()
	in.WriteString(stdin)
	code := cli.Run(context.Background(), args, ios)
	return out.String(), errOut.String(), code
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "..", rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGoldenScapyFrames decodes the scapy-made capture and checks every key
// the expectations name (testdata/golden/README.md says how they were made).
func TestGoldenScapyFrames(t *testing.T) {
	stdout, stderr, code := run(t, "", "proto", "decode", "--output", "json", repoFile(t, "testdata/rocev2-golden.pcap"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var want []map[string]any
	raw, err := os.ReadFile(repoFile(t, "testdata/golden/rocev2-golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d rows for %d frames", len(lines), len(want))
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("row %d is not JSON: %v\n%s", i+1, err, line)
		}
		for key, w := range want[i] {
			switch key {
			case "icrc_source", "note":
				continue // about the vector, not the frame
			}
			if g, ok := got[key]; !ok || !reflect.DeepEqual(subset(g, w), w) {
				t.Errorf("frame %d: %s = %v, want %v", i+1, key, got[key], w)
			}
		}
		// Keys the issue requires on every complete transport frame.
		if _, bad := got["error"]; !bad && got["link"] == "roce-v2" {
			for _, k := range []string{"opcode", "opcode_value", "dest_qp", "psn", "ack_req", "pkey", "pad", "icrc_ok"} {
				if _, ok := got[k]; !ok {
					t.Errorf("frame %d: key %s missing", i+1, k)
				}
			}
		}
	}
}

// subset trims got to the keys of want when both are objects, so extra
// detail we print (for example the decoded AETH type) does not count.
func subset(got, want any) any {
	g, ok1 := got.(map[string]any)
	w, ok2 := want.(map[string]any)
	if !ok1 || !ok2 {
		return got
	}
	out := map[string]any{}
	for k := range w {
		if v, ok := g[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestHexInput(t *testing.T) {
	// An RC ACK (syndrome 0x1F, MSN 2) over IPv4, as hex with noise.
	const ack = "# comment line\n" +
		"0x020000000001 02:00:00:00:00:02 0800 4500 0030 0001 0000 4011 6482 0a2a0002 0a2a0001" +
		" c5f1 12b7 001c 0000 1100ffff 00000123 00001001 1f000002 00000000  # ICRC deliberately wrong\n"
	stdout, stderr, code := run(t, ack, "proto", "decode", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(strings.Split(stdout, "\n")[0]), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r["opcode"] != "RC_ACKNOWLEDGE" || r["icrc_ok"] != false || r["dest_qp"] != 291.0 {
		t.Fatalf("row = %v", r)
	}
}

func TestMalformedAndUnreadable(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		inOutput string
	}{
		{"garbage hex row", []string{"proto", "decode", "--hex", "0102"}, "", 0, "truncated"},
		{"not hex", []string{"proto", "decode"}, "zz\n", 1, "not hex"},
		{"missing file", []string{"proto", "decode", "/nonexistent.pcap"}, "", 1, "no such file"},
		{"bad link", []string{"proto", "decode", "--link", "fddi", "--hex", "00"}, "", 2, "--link"},
		{"file and hex", []string{"proto", "decode", "--hex", "00", "x.pcap"}, "", 2, "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(out+errOut, tc.inOutput) {
				t.Fatalf("output lacks %q:\n%s%s", tc.inOutput, out, errOut)
			}
		})
	}
}

func TestTableIsPlainWhenPiped(t *testing.T) {
	out, errOut, code := run(t, "", "proto", "decode", repoFile(t, "testdata/rocev2-golden.pcap"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "\x1b") {
		t.Fatal("escape codes in piped output")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 32 || !strings.HasPrefix(lines[0], "FRAME") {
		t.Fatalf("%d lines, header %q", len(lines), lines[0])
	}
	if !strings.Contains(lines[21], "BAD") {
		t.Errorf("frame 21 (flipped bit) not flagged: %q", lines[21])
	}
	if !bytes.Contains([]byte(lines[12]), []byte("RC_ACKNOWLEDGE")) {
		t.Errorf("frame 12: %q", lines[12])
	}
}

func TestCountAndCheckICRC(t *testing.T) {
	pcap := repoFile(t, "testdata/rocev2-golden.pcap")
	out, errOut, code := run(t, "", "proto", "decode", "--count", "3", "--check-icrc", pcap)
	if code != 0 || len(strings.Split(strings.TrimSpace(out), "\n")) != 4 || !strings.Contains(errOut, "decoded 3 frames: 3 RoCE/IB transport frames, 0 with a bad") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// The golden capture holds two frames with a bad ICRC (21 and 25).
	_, errOut, code = run(t, "", "proto", "decode", "--check-icrc", "-o", "json", pcap)
	if code != 3 || !strings.Contains(errOut, "2 with a bad ICRC") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
