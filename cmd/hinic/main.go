// Command hinic is the HiNIC command-line tool; see internal/cli.
package main

import (
	"os"

	"github.com/PacketFive/hinic/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
