package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/image"
)

// chooseAccel decides the accelerator of each guest image of the rack
// from the spec's accel and the KVM probe of the image's kernel: the map
// goes from Guest.Image to tcg or kvm, why has one line per image. An
// accel: kvm that the probe refutes is an error.
func chooseAccel(ctx context.Context, r *Rack, pr *accel.Prober, p Progress) (map[string]string, []string, error) {
	if pr == nil {
		pr = &accel.Prober{}
	}
	out := map[string]string{}
	var why []string
	images := map[string]bool{}
	for _, g := range r.Guests {
		images[g.Image] = true
	}
	for _, g := range r.Guests {
		if _, done := out[g.Image]; done {
			continue
		}
		dir, err := filepath.Abs(g.Image)
		if err != nil {
			return nil, nil, err
		}
		if r.Accel != accel.TCG {
			p("accel: probing KVM with the guest kernel %s (once per host and kernel)", filepath.Join(dir, image.FileKernel))
		}
		a, line, err := pr.Choose(ctx, r.Accel, filepath.Join(dir, image.FileKernel))
		if err != nil {
			return nil, nil, fmt.Errorf("deploy: %w", err)
		}
		out[g.Image] = a
		line = "accel: " + line
		if len(images) > 1 {
			line += " (guests of " + g.Image + ")"
		}
		p("%s", line)
		why = append(why, line)
	}
	return out, why, nil
}

// consoleHint says what a guest that missed its boot timeout showed on
// its console: nothing (under KVM most likely the accelerator's fault),
// or its last lines.
func consoleHint(path, accelName string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("no console log %s: %v", path, err)
	}
	text := strings.TrimSpace(strings.ReplaceAll(string(b), "\r", ""))
	if text == "" {
		if accelName == accel.KVM {
			return fmt.Sprintf("its console %s is empty: under KVM this means that KVM cannot run this kernel on this host; set accel: tcg in the rack spec", path)
		}
		return fmt.Sprintf("its console %s is empty: the kernel printed nothing (see qemu.log beside it)", path)
	}
	return fmt.Sprintf("its console %s ends with:\n%s", path, indent(lastLines(text, 8), "    "))
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}
