package rackview_test

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"testing"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/rackview"
)

// FuzzDraw draws any spec deploy accepts, in every format: no panic, and
// every SVG is well-formed XML whatever the names hold (spec names are
// the user's: "<", "&" and quotes must be escaped).
func FuzzDraw(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "racks", "*.yaml"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(b)
		}
	}
	// Names that need escaping, a link to a missing port, more guests
	// than blade slots.
	f.Add([]byte("name: 'a<b&\"c'\nswitches: [{name: 'x<y', ports: 3}, {name: s2}]\nlinks: [{a: 'x<y:3', b: 's2:99'}]\n" +
		"guests: [{name: 'g<1>', switch: 'x<y', gpus: {count: 2}}, {name: g2, switch: s2}]\n"))
	f.Add([]byte("switches: [{name: sw0, ports: 12}]\nguests: [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := deploy.ParseRack(b)
		if err != nil || r.Defaults() != nil {
			return
		}
		if len(r.Guests) > 64 || len(r.Switches) > 16 {
			return // keep each run small
		}
		for _, sw := range r.Switches {
			if sw.Ports > 256 {
				return
			}
		}
		m := rackview.FromSpec(r)
		for _, rd := range renders {
			for _, view := range []string{"front", "logical", "flows"} {
				var out bytes.Buffer
				if err := rd.fn(&out, m); err != nil {
					t.Fatal(err)
				}
				if rd.ext[len(rd.ext)-3:] == "svg" {
					d := xml.NewDecoder(&out)
					for {
						_, err := d.Token()
						if err != nil {
							if err.Error() != "EOF" {
								t.Fatalf("%s: %v", rd.ext, err)
							}
							break
						}
					}
				}
				var js bytes.Buffer
				if err := rackview.JSON(&js, m, view); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
