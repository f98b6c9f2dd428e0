package pkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// An ar archive (deb(5)): the global header, then members of a 60-byte
// header (name 16, mtime 12, uid 6, gid 6, mode 8, size 10, "`\n") and
// their data, padded to an even length with "\n".
const (
	arMagic     = "!<arch>\n"
	arHeaderLen = 60
)

// addControlFiles adds members (name -> content) to the control.tar.gz
// of the .deb at path, as nfpm writes its own: regular files of mode
// 0644 at mtime, GNU format, gzip at the default level. Every other byte
// of the package stays as it was, so a build stays reproducible.
func addControlFiles(path string, members map[string]string, mtime time.Time) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(data, []byte(arMagic)) {
		return errors.New("not an ar archive")
	}
	var out bytes.Buffer
	out.WriteString(arMagic)
	found := false
	for off := len(arMagic); off < len(data); {
		if off+arHeaderLen > len(data) || string(data[off+58:off+60]) != "`\n" {
			return fmt.Errorf("bad ar member header at %d", off)
		}
		hdr := append([]byte{}, data[off:off+arHeaderLen]...)
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil || size < 0 || off+arHeaderLen+size > len(data) {
			return fmt.Errorf("bad ar member size at %d", off)
		}
		body := data[off+arHeaderLen : off+arHeaderLen+size]
		off += arHeaderLen + size + size%2
		if strings.TrimRight(string(hdr[:16]), " /") == "control.tar.gz" {
			if body, err = extendControl(body, members, mtime); err != nil {
				return err
			}
			copy(hdr[48:58], fmt.Sprintf("%-10d", len(body)))
			found = true
		}
		out.Write(hdr)
		out.Write(body)
		if len(body)%2 == 1 {
			out.WriteByte('\n')
		}
	}
	if !found {
		return errors.New("no control.tar.gz member")
	}
	return os.WriteFile(path, out.Bytes(), modeFile)
}

// extendControl returns the control.tar.gz gz with members appended.
func extendControl(gz []byte, members map[string]string, mtime time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if _, dup := members[strings.TrimPrefix(h.Name, "./")]; dup {
			return nil, fmt.Errorf("control.tar.gz already has %s", h.Name)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &tar.Header{Name: "./" + n, Size: int64(len(members[n])), Mode: modeFile,
			ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatGNU}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(members[n])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
