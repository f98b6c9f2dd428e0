package verify

import (
	"context"
	"strconv"
	"testing"

	"github.com/PacketFive/hinic/internal/rack"
)

func TestEmbeddedGatePasses(t *testing.T) {
	for _, mtu := range []int{1024, 4096} {
		t.Run("mtu="+itoa(mtu), func(t *testing.T) {
			r, err := rack.Start(context.Background(), rack.Config{Hosts: 3, MTU: mtu, MemSize: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			o := EmbeddedOptions{PingPongIters: 50, BWIters: 200, LatIters: 100, McastIters: 100}
			rep := Run(context.Background(), "embedded", EmbeddedCases(r, o), t.Logf)
			if len(rep.Cases) != 15 {
				t.Errorf("%d cases, want 15", len(rep.Cases))
			}
			for _, c := range rep.Cases {
				if c.Result != Pass {
					t.Errorf("%s: %s: %s", c.Case, c.Result, c.Detail)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestEmbeddedIBGatePasses(t *testing.T) {
	r, err := rack.Start(context.Background(), rack.Config{Hosts: 3, MTU: 2048, MemSize: 16 << 20, LinkLayer: rack.LinkIB})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o := EmbeddedOptions{PingPongIters: 50, BWIters: 200, LatIters: 100, McastIters: 100}
	rep := Run(context.Background(), "embedded-ib", EmbeddedIBCases(r, o), t.Logf)
	if len(rep.Cases) != 16 {
		t.Errorf("%d cases, want 16", len(rep.Cases))
	}
	for _, c := range rep.Cases {
		if c.Result != Pass {
			t.Errorf("%s: %s: %s", c.Case, c.Result, c.Detail)
		}
	}
}
