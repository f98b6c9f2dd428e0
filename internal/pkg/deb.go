package pkg

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
)

// entry is one file of a package. nfpm reads contents from paths, so
// generated files are written into the stage first.
type entry struct {
	Src  string // file on disk; for a symlink, its target
	Dst  string // absolute path in the package
	Mode fs.FileMode
	Type string // files.TypeFile (""), TypeConfig, TypeSymlink
}

// debSpec is what differs between the packages.
type debSpec struct {
	Name        string
	Arch        string
	Section     string
	Description string // synopsis, a newline, the extended description
	Depends     []string
	Recommends  []string
	Provides    []string
	Conflicts   []string
	Fields      map[string]string
	Entries     []entry
	Scripts     nfpm.Scripts // staged paths
	Triggers    nfpm.DebTriggers
	// Control holds extra control.tar.gz members by name (shlibs), which
	// nfpm does not write.
	Control map[string]string
	// Dir is the package's directory under packaging/: its copyright and
	// lintian-overrides files are shipped.
	Dir string
}

// Modes of packaged files. Everything is owned by root:root.
const (
	modeFile = 0o644
	modeExec = 0o755
)

// pack writes the package described by s into the output directory.
func (b *build) pack(s debSpec) (Result, error) {
	r := Result{Package: s.Name, Version: b.debVersion(), Arch: s.Arch}
	doc := "/usr/share/doc/" + s.Name
	entries := append([]entry{}, s.Entries...)
	for _, f := range []struct{ src, dst string }{
		{"copyright", doc + "/copyright"},
		{"lintian-overrides", "/usr/share/lintian/overrides/" + s.Name},
	} {
		src := filepath.Join(b.opts.Repo, PackagingDir, s.Dir, f.src)
		if _, err := os.Stat(src); err != nil {
			return r, fmt.Errorf("pkg: %s: %w", s.Name, err)
		}
		entries = append(entries, entry{Src: src, Dst: f.dst, Mode: modeFile})
	}
	changelog, err := b.changelog(s.Name)
	if err != nil {
		return r, err
	}
	var contents files.Contents
	for _, e := range entries {
		c := &files.Content{
			Source:      e.Src,
			Destination: e.Dst,
			Type:        e.Type,
			FileInfo:    &files.ContentFileInfo{Owner: "root", Group: "root", Mode: e.Mode, MTime: b.epoch},
		}
		if e.Type == files.TypeSymlink {
			c.FileInfo.Mode = 0
		}
		contents = append(contents, c)
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:            s.Name,
		Arch:            s.Arch,
		Platform:        "linux",
		Version:         b.version,
		VersionSchema:   "none",
		Release:         Release,
		Section:         s.Section,
		Priority:        "optional",
		Maintainer:      Maintainer,
		Description:     wrapDescription(s.Description),
		Homepage:        Homepage,
		Changelog:       changelog,
		DisableGlobbing: true,
		MTime:           b.epoch,
		Overridables: nfpm.Overridables{
			Depends:    s.Depends,
			Recommends: s.Recommends,
			Provides:   s.Provides,
			Conflicts:  s.Conflicts,
			Contents:   contents,
			Umask:      0o022,
			Scripts:    s.Scripts,
			Deb: nfpm.Deb{
				// gzip from Go's compress/gzip writes no name or time:
				// the same tar gives the same bytes.
				Compression: "gzip",
				Fields:      s.Fields,
				Triggers:    s.Triggers,
			},
		},
	})
	pkgr, err := nfpm.Get("deb")
	if err != nil {
		return r, err
	}
	path := filepath.Join(b.opts.Out, pkgr.ConventionalFileName(info))
	tmp, err := os.CreateTemp(b.opts.Out, ".tmp-*.deb")
	if err != nil {
		return r, fmt.Errorf("pkg: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := pkgr.Package(info, tmp); err != nil {
		tmp.Close()
		return r, fmt.Errorf("pkg: %s: %w", s.Name, err)
	}
	if err := tmp.Chmod(modeFile); err != nil {
		tmp.Close()
		return r, err
	}
	if err := tmp.Close(); err != nil {
		return r, err
	}
	if len(s.Control) > 0 {
		if err := addControlFiles(tmp.Name(), s.Control, b.epoch); err != nil {
			return r, fmt.Errorf("pkg: %s: %w", s.Name, err)
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return r, fmt.Errorf("pkg: %w", err)
	}
	return r, finish(&r, path)
}

// changelog writes the chglog file nfpm renders into changelog.Debian.gz:
// one entry for this version, dated at the epoch. The deb block makes the
// first line a valid "pkg (version) unstable; urgency=medium".
func (b *build) changelog(name string) (string, error) {
	dir, err := b.dir("changelog", name)
	if err != nil {
		return "", err
	}
	note := "Package built from the HiNIC sources."
	if b.commit != "" {
		note = "Package built from HiNIC commit " + b.commit + "."
	}
	text := fmt.Sprintf(`- semver: %q
  date: %s
  packager: %q
  deb:
    urgency: medium
    distributions: [unstable]
  changes:
    - note: %q
`, b.debVersion(), b.epoch.Format("2006-01-02T15:04:05Z"), Maintainer, note)
	path := filepath.Join(dir, "changelog.yml")
	return path, os.WriteFile(path, []byte(text), 0o644)
}

// placeholder matches an @KEY@ left in a maintainer script.
var placeholder = regexp.MustCompile(`@[A-Z][A-Z0-9_]*@`)

// script stages a maintainer script from packaging/<dir>/<name> with
// @KEY@ placeholders replaced, and returns its path.
func (b *build) script(dir, name string, vars map[string]string) (string, error) {
	data, err := os.ReadFile(filepath.Join(b.opts.Repo, PackagingDir, dir, name))
	if err != nil {
		return "", fmt.Errorf("pkg: %w", err)
	}
	text := string(data)
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		text = strings.ReplaceAll(text, "@"+k+"@", vars[k])
	}
	if m := placeholder.FindString(text); m != "" {
		return "", fmt.Errorf("pkg: %s/%s: placeholder %s has no value", dir, name, m)
	}
	sd, err := b.dir("scripts", dir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(sd, name)
	return path, os.WriteFile(path, []byte(text), 0o755)
}

// copyFile copies src to dst with mode.
func copyFile(src, dst string, mode fs.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}

// wrapDescription folds the extended description (after the synopsis
// line) into lines of at most 72 characters: lintian warns about lines
// longer than 80, and nfpm writes each line as it is.
func wrapDescription(d string) string {
	synopsis, body, _ := strings.Cut(d, "\n")
	var lines []string
	line := ""
	for _, w := range strings.Fields(body) {
		if line != "" && len(line)+1+len(w) > 72 {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(append([]string{synopsis}, lines...), "\n")
}
