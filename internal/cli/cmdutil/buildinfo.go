package cmdutil

// BuildInfo describes the running hinic binary. Package cli fills it from
// the variables the linker sets (-X) or, failing that, from the Go build
// information.
type BuildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Date     string `json:"date"`
	Go       string `json:"go"`
	Platform string `json:"platform"` // GOOS/GOARCH
}
