package deploy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSpecErrors: a bad spec's error names the file, the line and the
// key, whether the loader finds it (unknown keys, types, enums, forms)
// or Defaults does (a key's value against the others').
func TestSpecErrors(t *testing.T) {
	const head = "name: x\nswitches:\n  - name: sw0\n    ports: 4\nguests:\n  - name: a\n  - name: b\n" // lines 1-7
	for name, tc := range map[string]struct {
		spec string
		want string
	}{
		"unknown top key":   {"name: x\nguets: []\n", `x.yaml:2: guets: unknown key (known here: name, run-dir, image, network, ssh-port-base, accel, pcap, boot-timeout, mtu, procs, daemons, hosts, switches, guests, links, opensm, metrics)`},
		"unknown guest key": {head + "    colour: blue\n", `x.yaml:8: guests[1].colour: unknown key (known here: name, memory, cpus, image, nic, link, ip, mac, switch, port, ssh-port, host, debs, files, trust-pause, gpus)`},
		"bad nic":           {head + "    nic: foo\n", `x.yaml:8: guests[1].nic: "foo" is not one of rxe, hicain`},
		"bad link":          {head + "    link: fc\n", `x.yaml:8: guests[1].link: "fc" is not one of eth, ib`},
		"bad accel":         {"accel: hvf\n", `x.yaml:1: accel: "hvf" is not one of tcg, kvm, auto`},
		"int":               {head + "    memory: lots\n", `x.yaml:8: guests[1].memory: "lots" is not a whole number`},
		"bool":              {"pcap: maybe\n", `x.yaml:1: pcap: "maybe" is not true or false`},
		"duration":          {"boot-timeout: soon\n", `x.yaml:1: boot-timeout: "soon" is not a duration such as 90s or 5m`},
		"list":              {"switches: sw0\n", `x.yaml:1: switches: want a list, not "sw0"`},
		"mapping":           {"guests:\n  - a\n", `x.yaml:2: guests[0]: want a mapping of keys (name, memory, cpus, image, nic, link, ip, mac, switch, port, ssh-port, host, debs, files, trust-pause, gpus), not "a"`},
		"twice":             {"name: x\nname: y\n", `x.yaml:2: name: given twice`},
		"gpu count":         {head + "    gpus: {count: 9}\n", `x.yaml:8: guests[1].gpus.count: 9 is out of range 0 to 8`},
		"gpu key":           {head + "    gpus:\n      count: 1\n      mem: 64\n", `x.yaml:10: guests[1].gpus.mem: unknown key (known here: count, memory, ids, hilink, hilink-ports)`},
		"link end":          {"links:\n  - a: sw0\n    b: \"sw1:1\"\n", `x.yaml:2: links[0].a: "sw0" does not have the form SWITCH:PORT (sw0:10)`},
		"syntax":            {"name: x\n  bad: [\n", `x.yaml:2: mapping values are not allowed in this context`},
		// Defaults' errors, placed at the key or, when the file does
		// not give it, at the guest.
		"port range":   {head + "    port: 9\n", `x.yaml:8: guests[1].port: guest b: port 9 of sw0 is out of range 1..4`},
		"ip":           {head + "    ip: 10.0.0.1\n", `x.yaml:8: guests[1].ip: guest b: ip "10.0.0.1" is not in 10.42.0.0/24`},
		"no switch":    {head + "    switch: sw9\n", `x.yaml:8: guests[1].switch: guest b: no switch "sw9"`},
		"duplicate":    {head + "  - name: a\n", `x.yaml:8: guests[2].name: guest name "a": empty, duplicate or has '/', ':' or a space`},
		"ib on rxe":    {head + "    link: ib\n", `x.yaml:8: guests[1].link: guest b: link ib needs nic hicain (Soft-RoCE is RoCEv2 only)`},
		"gpu ids":      {head + "    gpus: {count: 2, ids: [3, 3]}\n", `x.yaml:8: guests[1].gpus: guest b: gpus: id 3 given twice`},
		"implicit ip":  {"network: 10.9.0.0/30\nguests:\n  - name: a\n  - name: b\n  - name: c\n  - name: d\n", `x.yaml:6: guests[3].ip: guest d: ip "10.9.0.4" is not in 10.9.0.0/30`},
		"opensm":       {head + "opensm: a\n", `x.yaml:8: opensm: "a": the rack has no link ib guest`},
		"mixed layers": {"guests:\n  - {name: a, nic: hicain, link: ib}\n  - {name: b, nic: hicain}\n", `x.yaml:3: guests[1].link: switch sw0 has guests of link layers ib and eth; give each link layer its own switches`},
	} {
		t.Run(name, func(t *testing.T) { checkSpecError(t, tc.spec, tc.want) })
	}
}

// checkSpecError reads spec as the file x.yaml and completes it: the
// error must be want, and a *SpecError.
func checkSpecError(t *testing.T, spec, want string) {
	t.Helper()
	err := specError(t, spec)
	if err == nil || err.Error() != want {
		t.Errorf("error\n  %v\nwant\n  %s", err, want)
	}
	if _, ok := AsSpecError(err); err != nil && !ok {
		t.Errorf("%T is not a *SpecError", err)
	}
}

// TestSpecErrorWithoutFile: ParseRack's errors give the line, a rack
// built in Go only the key.
func TestSpecErrorWithoutFile(t *testing.T) {
	_, err := ParseRack([]byte("guests:\n  - nic: foo\n"))
	if err == nil || err.Error() != `line 2: guests[0].nic: "foo" is not one of rxe, hicain` {
		t.Errorf("ParseRack: %v", err)
	}
	r := &Rack{Guests: []Guest{{Name: "a", NIC: "foo"}}}
	if err := r.Defaults(); err == nil || err.Error() != `deploy: guests[0].nic: "foo" is not one of rxe, hicain (guest a)` {
		t.Errorf("Defaults: %v", err)
	}
}

// specError writes spec to x.yaml in a temporary working directory and
// returns what ReadRack, then Defaults, say of it.
func specError(t *testing.T, spec string) error {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("x.yaml", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRack("x.yaml")
	if err == nil {
		r.RunDir = filepath.Join(dir, "run")
		err = r.Defaults()
	}
	return err
}
