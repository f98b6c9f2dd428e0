package pkg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ResolveEpoch returns the time stamped on every file and archive member:
// SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/)
// when set, else the time of the last commit when repo is a git checkout,
// else DefaultEpoch. An unparsable SOURCE_DATE_EPOCH is an error rather
// than a silent fallback.
func ResolveEpoch(ctx context.Context, repo string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("pkg: SOURCE_DATE_EPOCH=%q is not a count of seconds since 1970", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	if s := gitOutput(ctx, repo, "log", "-1", "--format=%ct"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC(), nil
		}
	}
	return time.Unix(DefaultEpoch, 0).UTC(), nil
}

var (
	describeTag  = regexp.MustCompile(`^v([0-9][0-9A-Za-z.~+]*)(?:-([0-9]+)-g([0-9a-f]+))?(-dirty)?$`)
	describeHash = regexp.MustCompile(`^([0-9a-f]+)(-dirty)?$`)
)

// ResolveVersion returns the upstream version of the packages from git:
//
//	v0.2.0                     0.2.0
//	v0.2.0-3-g0123456          0.2.0+git3.0123456
//	0123456 (no tag)           0.0.0+git20261130.0123456 (the epoch's date)
//	any of these, -dirty       the same with .dirty appended
//
// Outside a git checkout it is 0.0.0.
func ResolveVersion(ctx context.Context, repo string, epoch time.Time) string {
	d := gitOutput(ctx, repo, "describe", "--tags", "--match", "v[0-9]*", "--always", "--dirty", "--abbrev=7")
	return versionFromDescribe(d, epoch)
}

func versionFromDescribe(d string, epoch time.Time) string {
	var v, dirty string
	if m := describeTag.FindStringSubmatch(d); m != nil {
		v, dirty = m[1], m[4]
		if m[2] != "" {
			v += "+git" + m[2] + "." + m[3]
		}
	} else if m := describeHash.FindStringSubmatch(d); m != nil {
		v, dirty = "0.0.0+git"+epoch.UTC().Format("20060102")+"."+m[1], m[2]
	} else {
		return "0.0.0"
	}
	if dirty != "" {
		if strings.Contains(v, "+") {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	return v
}

// debianUpstream matches an upstream version Debian accepts (Policy 5.6.12)
// that also makes a clean DKMS and file name: no epoch, no hyphen.
var debianUpstream = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

func checkVersion(v string) error {
	if !debianUpstream.MatchString(v) {
		return fmt.Errorf("pkg: version %q: an upstream version starts with a digit and holds only letters, digits and . + ~", v)
	}
	return nil
}

// gitOutput runs git in repo and returns its trimmed output, or "" when
// git is missing, repo is no checkout, or the command fails.
func gitOutput(ctx context.Context, repo string, args ...string) string {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// DebArch returns the Debian architecture of the machine pkg runs on.
func DebArch() string {
	return map[string]string{"amd64": "amd64", "arm64": "arm64", "386": "i386", "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}[goarch()]
}

// multiarch returns the Debian multiarch triplet of the host (the
// directory under /usr/lib that holds its libraries), or an error on an
// architecture it does not know.
func multiarch() (string, error) {
	t := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "386": "i386-linux-gnu", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu", "riscv64": "riscv64-linux-gnu"}[goarch()]
	if t == "" {
		return "", fmt.Errorf("pkg: no multiarch directory known for GOARCH %s", goarch())
	}
	return t, nil
}

func goarch() string { return runtime.GOARCH }

// run runs a command in dir with extra environment, its output going to
// the build log; a failure returns an error with the command line and the
// last lines of output, which usually say what went wrong.
func (b *build) run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(b.epoch.Unix(), 10), "LC_ALL=C.UTF-8"), env...)
	var tail tailBuffer
	w := &teeWriter{a: b.log(), b: &tail}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail.String())
	}
	return nil
}

// tailBuffer keeps the last lines written to it.
type tailBuffer struct{ lines []string }

const tailLines = 20

func (t *tailBuffer) Write(p []byte) (int, error) {
	for l := range strings.Lines(string(p)) {
		t.lines = append(t.lines, strings.TrimRight(l, "\n"))
	}
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.Join(t.lines, "\n") }

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t *teeWriter) Write(p []byte) (int, error) {
	_, _ = t.a.Write(p)
	return t.b.Write(p)
}
