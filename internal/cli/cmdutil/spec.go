package cmdutil

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/PacketFive/hinic/internal/guestmem"
)

// SpecKeys are the keys of a `key=value,...` flag value (--vnic, --gpu),
// each with what sets it from its value. A setter's error says what is
// wrong with the value.
type SpecKeys map[string]func(key, val string) error

// ParseSpec parses a comma-separated list of key=value, setting each
// key in the order given. Empty items are skipped; an item without '='
// or with a key not in keys is an error.
func ParseSpec(spec string, keys SpecKeys) error {
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", kv)
		}
		set, ok := keys[k]
		if !ok {
			return fmt.Errorf("unknown key %q", k)
		}
		if err := set(k, val); err != nil {
			return err
		}
	}
	return nil
}

// ParseSpecs parses every value of a repeated spec flag with parse; the
// error of a bad one names the flag and the value.
func ParseSpecs[T any](flag string, specs []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, s := range specs {
		c, err := parse(s)
		if err != nil {
			return nil, UsageErrorf("%s %q: %v", flag, s, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// StringKey sets *p to the value.
func StringKey(p *string) func(key, val string) error {
	return func(_, val string) error { *p = val; return nil }
}

// SizeKey sets *p to the value parsed by ParseSize.
func SizeKey(p *uint64) func(key, val string) error {
	return func(_, val string) (err error) { *p, err = ParseSize(val); return err }
}

// IntKey sets *p to the value, a decimal integer.
func IntKey(p *int) func(key, val string) error {
	return func(_, val string) (err error) { *p, err = strconv.Atoi(val); return err }
}

// PositiveKey sets *p to the value, a positive decimal integer.
func PositiveKey(p *int) func(key, val string) error {
	return func(key, val string) (err error) {
		if *p, err = strconv.Atoi(val); err == nil && *p <= 0 {
			err = fmt.Errorf("%s=%s: want a positive number", key, val)
		}
		return err
	}
}

// BoolKey sets *p to the value as strconv.ParseBool reads it.
func BoolKey(p *bool) func(key, val string) error {
	return func(_, val string) (err error) { *p, err = strconv.ParseBool(val); return err }
}

// GuestSpec points at the fields of a backend's config that say where
// its guest is, the keys every ivshmem backend's spec shares (`device
// serve --vnic`, `gpu serve --gpu`): socket=, ram=, ram-size= and
// machine=.
type GuestSpec struct {
	Socket  *string
	RAMPath *string
	RAMSize *uint64
	Machine *guestmem.Machine
}

// Keys returns more with the guest's keys added.
func (g GuestSpec) Keys(more SpecKeys) SpecKeys {
	more["socket"] = StringKey(g.Socket)
	more["ram"] = StringKey(g.RAMPath)
	more["ram-size"] = SizeKey(g.RAMSize)
	more["machine"] = func(_, val string) error {
		*g.Machine = guestmem.Machine(val)
		if val != "pc" && val != "q35" {
			return fmt.Errorf("machine %q: want pc or q35", val)
		}
		return nil
	}
	return more
}

// Check returns an error naming the first of the required guest keys
// (socket=, ram=, ram-size=) that the spec left out.
func (g GuestSpec) Check() error {
	switch {
	case *g.Socket == "":
		return fmt.Errorf("socket= is required")
	case *g.RAMPath == "":
		return fmt.Errorf("ram= is required")
	case *g.RAMSize == 0:
		return fmt.Errorf("ram-size= is required")
	}
	return nil
}
