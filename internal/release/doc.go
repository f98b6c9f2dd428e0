// Package release holds no code: its tests check the release
// configuration (.goreleaser.yaml) against the code and the Makefile, so
// that a renamed version variable or a changed target fails `go test`
// rather than a release.
package release
