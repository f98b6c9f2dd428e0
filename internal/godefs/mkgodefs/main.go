// Command mkgodefs writes the Go mirror of a device ABI header:
//
//	go run ../godefs/mkgodefs types_abi.go zabi.go
//
// runs `go tool cgo -godefs` on the first file, in the current directory,
// and writes what internal/godefs makes of it to the second.
package main

import (
	"fmt"
	"os"

	"github.com/PacketFive/hinic/internal/godefs"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkgodefs INPUT.go OUTPUT.go")
		os.Exit(2)
	}
	out, err := godefs.Generate(".", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[2], out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
