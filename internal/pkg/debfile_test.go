package pkg_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// debFile is a .deb read back with Go's own readers: the ar members, the
// control archive's files and the data archive's entries.
type debFile struct {
	Members []arMember
	Control map[string]string // control, md5sums, conffiles, postinst, ...
	Fields  map[string]string // parsed control file
	Data    []tarEntry
}

type arMember struct {
	Name  string
	MTime int64
	Mode  string
	Data  []byte
}

type tarEntry struct {
	Name     string
	Mode     int64
	Type     byte
	Uname    string
	Gname    string
	Uid, Gid int
	ModTime  time.Time
	Linkname string
	Data     []byte
}

// readDeb parses path as a Debian binary package (deb(5): an ar archive
// of debian-binary, control.tar.gz and data.tar.*).
func readDeb(t *testing.T, path string) *debFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	members, err := readAr(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	d := &debFile{Members: members, Control: map[string]string{}}
	for _, m := range members {
		switch m.Name {
		case "control.tar.gz":
			ents, err := readTarGz(m.Data)
			if err != nil {
				t.Fatalf("%s: control.tar.gz: %v", path, err)
			}
			for _, e := range ents {
				if e.Type == tar.TypeReg {
					d.Control[strings.TrimPrefix(e.Name, "./")] = string(e.Data)
				}
			}
		case "data.tar.gz":
			if d.Data, err = readTarGz(m.Data); err != nil {
				t.Fatalf("%s: data.tar.gz: %v", path, err)
			}
		}
	}
	d.Fields = parseControl(d.Control["control"])
	return d
}

func readAr(b []byte) ([]arMember, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(b, []byte(magic)) {
		return nil, fmt.Errorf("not an ar archive")
	}
	b = b[len(magic):]
	var out []arMember
	for len(b) > 0 {
		if len(b) < 60 {
			return nil, fmt.Errorf("short ar header")
		}
		h := string(b[:60])
		if h[58:60] != "`\n" {
			return nil, fmt.Errorf("bad ar header magic %q", h[58:60])
		}
		size, err := strconv.Atoi(strings.TrimSpace(h[48:58]))
		if err != nil {
			return nil, err
		}
		mtime, _ := strconv.ParseInt(strings.TrimSpace(h[16:28]), 10, 64)
		b = b[60:]
		if len(b) < size {
			return nil, fmt.Errorf("short ar member")
		}
		out = append(out, arMember{
			Name:  strings.TrimSuffix(strings.TrimSpace(h[:16]), "/"),
			MTime: mtime,
			Mode:  strings.TrimSpace(h[40:48]),
			Data:  b[:size],
		})
		b = b[size:]
		if size%2 == 1 && len(b) > 0 {
			b = b[1:]
		}
	}
	return out, nil
}

func readTarGz(b []byte) ([]tarEntry, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out = append(out, tarEntry{
			Name: h.Name, Mode: h.Mode, Type: h.Typeflag, Uname: h.Uname, Gname: h.Gname,
			Uid: h.Uid, Gid: h.Gid, ModTime: h.ModTime, Linkname: h.Linkname, Data: data,
		})
	}
}

// parseControl parses a deb822 stanza; continuation lines are joined
// with newlines.
func parseControl(s string) map[string]string {
	fields := map[string]string{}
	var last string
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			fields[last] += "\n" + strings.TrimSpace(line)
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	return fields
}

// file returns the data entry at path ("/usr/bin/hinic"), or nil.
func (d *debFile) file(path string) *tarEntry {
	for i := range d.Data {
		if strings.TrimPrefix(d.Data[i].Name, ".") == path || strings.TrimPrefix(d.Data[i].Name, ".") == path+"/" {
			return &d.Data[i]
		}
	}
	return nil
}

// paths lists the data entries' paths, directories with a trailing slash.
func (d *debFile) paths() []string {
	var out []string
	for _, e := range d.Data {
		out = append(out, strings.TrimPrefix(e.Name, "."))
	}
	return out
}
