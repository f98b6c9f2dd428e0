package pkg

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ModInfo returns the key=value pairs of a kernel module's .modinfo
// section (what modinfo(8) prints).
func ModInfo(ko string) (map[string]string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return nil, fmt.Errorf("pkg: %s: %w", filepath.Base(ko), err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("pkg: %s has no .modinfo section; not a kernel module", filepath.Base(ko))
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("pkg: %s: %w", filepath.Base(ko), err)
	}
	info := map[string]string{}
	for _, kv := range strings.Split(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			info[k] = v
		}
	}
	return info, nil
}

// sharedObject is what the provider package needs to know about the
// provider's .so.
type sharedObject struct {
	Needed []string
	// GlibcVersion is the highest GLIBC_x.y its symbols require ("" when
	// none), the lower bound of its libc6 dependency.
	GlibcVersion string
	Stripped     bool
}

// inspectSharedObject checks that path is a shared object for the host's
// machine and reads its dependencies.
func inspectSharedObject(path string) (sharedObject, error) {
	var so sharedObject
	f, err := elf.Open(path)
	if err != nil {
		return so, fmt.Errorf("pkg: %s is not an ELF file: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return so, fmt.Errorf("pkg: %s is %v, not a shared object", filepath.Base(path), f.Type)
	}
	if want, ok := elfMachine[goarch()]; ok && f.Machine != want {
		return so, fmt.Errorf("pkg: %s is for %v, not %v", filepath.Base(path), f.Machine, want)
	}
	if so.Needed, err = f.ImportedLibraries(); err != nil {
		return so, fmt.Errorf("pkg: %s: %w", filepath.Base(path), err)
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		return so, fmt.Errorf("pkg: %s: %w", filepath.Base(path), err)
	}
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && versionLess(so.GlibcVersion, v) {
			so.GlibcVersion = v
		}
	}
	so.Stripped = f.Section(".symtab") == nil
	return so, nil
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386}

// versionLess compares dotted numeric versions ("2.3.4" < "2.34"); ""
// is less than anything.
func versionLess(a, b string) bool {
	if a == "" {
		return b != ""
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func hasNeeded(so sharedObject, lib string) bool { return slices.Contains(so.Needed, lib) }
