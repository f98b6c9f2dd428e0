package cmdutil

import (
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/guestmem"
)

type testSpec struct {
	Socket, RAM, Name string
	RAMSize           uint64
	Machine           guestmem.Machine
	N, Pos            int
	On                bool
}

func parseTestSpec(spec string) (testSpec, error) {
	var c testSpec
	g := GuestSpec{Socket: &c.Socket, RAMPath: &c.RAM, RAMSize: &c.RAMSize, Machine: &c.Machine}
	keys := g.Keys(SpecKeys{"name": StringKey(&c.Name), "n": IntKey(&c.N), "pos": PositiveKey(&c.Pos), "on": BoolKey(&c.On)})
	if err := ParseSpec(spec, keys); err != nil {
		return c, err
	}
	return c, g.Check()
}

func TestParseSpec(t *testing.T) {
	c, err := parseTestSpec("socket=/s,,ram=/r,ram-size=2M,machine=pc,name=a=b,n=-3,pos=7,on=true")
	if err != nil {
		t.Fatal(err)
	}
	want := testSpec{Socket: "/s", RAM: "/r", Name: "a=b", RAMSize: 2 << 20, Machine: "pc", N: -3, Pos: 7, On: true}
	if c != want {
		t.Errorf("%+v, want %+v", c, want)
	}
	for spec, msg := range map[string]string{
		"ram=/r,ram-size=1M":                        "socket= is required",
		"socket=/s,ram-size=1M":                     "ram= is required",
		"socket=/s,ram=/r":                          "ram-size= is required",
		"socket=/s,ram=/r,ram-size=1M,colour=1":     `unknown key "colour"`,
		"socket=/s,ram=/r,ram-size=1M,on":           `"on" is not key=value`,
		"socket=/s,ram=/r,ram-size=1M,pos=0":        "pos=0: want a positive number",
		"socket=/s,ram=/r,ram-size=1M,pos=x":        "invalid syntax",
		"socket=/s,ram=/r,ram-size=1M,n=1.5":        "invalid syntax",
		"socket=/s,ram=/r,ram-size=lots":            `size "lots"`,
		"socket=/s,ram=/r,ram-size=1M,machine=virt": `machine "virt": want pc or q35`,
		"socket=/s,ram=/r,ram-size=1M,on=maybe":     "invalid syntax",
	} {
		if _, err := parseTestSpec(spec); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: err %v, want %q", spec, err, msg)
		}
	}
}

func TestParseSpecs(t *testing.T) {
	got, err := ParseSpecs("--x", []string{"socket=/a,ram=/r,ram-size=1M", "socket=/b,ram=/r,ram-size=1M"}, parseTestSpec)
	if err != nil || len(got) != 2 || got[1].Socket != "/b" {
		t.Fatalf("%+v, %v", got, err)
	}
	_, err = ParseSpecs("--x", []string{"socket=/a,ram=/r,ram-size=1M", "socket=/b"}, parseTestSpec)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), `--x "socket=/b": ram= is required`) {
		t.Errorf("err = %v", err)
	}
}

// FuzzParseSpec: any spec either parses or is an error; it never panics,
// and what parses keeps the required keys.
func FuzzParseSpec(f *testing.F) {
	f.Add("socket=/s,ram=/r,ram-size=2M,machine=pc,name=a,n=1,pos=2,on=1")
	f.Add(",,=,socket=,ram-size=0")
	f.Add("pos=-1,machine=q35")
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := parseTestSpec(spec)
		if err == nil && (c.Socket == "" || c.RAM == "" || c.RAMSize == 0) {
			t.Errorf("%q parsed without a required key: %+v", spec, c)
		}
	})
}

func TestCells(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 19: "1.5 MiB", 8 << 30: "8.0 GiB", 1 << 62: "4096.0 PiB"} {
		if got := BytesCell(n); got != want {
			t.Errorf("BytesCell(%d) = %q, want %q", n, got, want)
		}
	}
	if g, c := GuestCell(false, 3), GuestCell(true, 3); g != "-" || c != "peer 3" {
		t.Errorf("GuestCell: %q %q", g, c)
	}
	if a, b := StateCell("live", 0), StateCell("fatal", 7); a != "live" || b != "fatal(7)" {
		t.Errorf("StateCell: %q %q", a, b)
	}
}
