package pkg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// LintianTag is one finding of lintian.
type LintianTag struct {
	// Severity is lintian's letter: E error, W warning, I info,
	// P pedantic, X experimental, O overridden (not shown by default).
	Severity string `json:"severity"`
	Package  string `json:"package"`
	Tag      string `json:"tag"`
	Info     string `json:"info,omitempty"`
}

func (t LintianTag) String() string {
	s := t.Severity + ": " + t.Package + ": " + t.Tag
	if t.Info != "" {
		s += " " + t.Info
	}
	return s
}

// LintianArgs are lintian's options: every severity shown, no limit on
// repeated tags.
var LintianArgs = []string{"--pedantic", "--display-info", "--tag-display-limit", "0"}

// lintianLine matches "E: pkg: tag info" and "W: pkg arch binary: tag info".
var lintianLine = regexp.MustCompile(`^([EWIPXO]): ([a-z0-9][a-z0-9+.-]*)(?: [^:]*)?: (\S+)(?: (.*))?$`)

// ParseLintian returns the tags in lintian's output.
func ParseLintian(out []byte) []LintianTag {
	var tags []LintianTag
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := lintianLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tags = append(tags, LintianTag{Severity: m[1], Package: m[2], Tag: m[3], Info: strings.TrimSpace(m[4])})
	}
	return tags
}

// Lintian runs lintian on the .deb files and returns its tags.
func Lintian(ctx context.Context, debs ...string) ([]LintianTag, error) {
	if _, err := exec.LookPath("lintian"); err != nil {
		return nil, fmt.Errorf("pkg: lintian not found: run `apt-get install lintian` (or hinic pkg build --fix as root), or pass --no-lintian")
	}
	cmd := exec.CommandContext(ctx, "lintian", append(append([]string{}, LintianArgs...), debs...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	tags := ParseLintian(stdout.Bytes())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ee *exec.ExitError
		// lintian exits non-zero when it reports an error tag; any other
		// failure is lintian's own.
		if !errors.As(err, &ee) || !hasSeverity(tags, "E") {
			return nil, fmt.Errorf("pkg: lintian: %w\n%s%s", err, stdout.String(), stderr.String())
		}
	}
	return tags, nil
}

func hasSeverity(tags []LintianTag, sev string) bool {
	for _, t := range tags {
		if t.Severity == sev {
			return true
		}
	}
	return false
}

// lintian checks every built package and fails on error tags.
func (b *build) lintian(ctx context.Context, results []Result) error {
	var debs []string
	for _, r := range results {
		if r.Built {
			debs = append(debs, r.File)
		}
	}
	if len(debs) == 0 {
		return nil
	}
	if _, err := exec.LookPath("lintian"); err != nil && b.opts.Fix {
		if err := b.aptInstall(ctx, "lintian", "lintian"); err != nil {
			return err
		}
	}
	b.progress("lintian %s", strings.Join(LintianArgs, " "))
	tags, err := Lintian(ctx, debs...)
	if err != nil {
		return err
	}
	var errs []string
	for i := range results {
		r := &results[i]
		if !r.Built {
			continue
		}
		r.Checked = true
		r.Lintian = []LintianTag{}
		for _, t := range tags {
			if t.Package == r.Package {
				r.Lintian = append(r.Lintian, t)
				if t.Severity == "E" {
					errs = append(errs, t.String())
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("pkg: %w:\n  %s", ErrLintian, strings.Join(errs, "\n  "))
	}
	return nil
}
