package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/shared"
	"github.com/PacketFive/hinic/internal/deploy"
)

// TestSchemaCommand: `deploy schema` prints a draft 2020-12 schema with
// the enums of nic and link.
func TestSchemaCommand(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	cmd := NewCmdDeploy(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}))
	cmd.SetArgs([]string{"schema"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Schema     string `json:"$schema"`
		Properties struct {
			Guests struct {
				Items struct {
					Properties map[string]struct {
						Enum []string `json:"enum"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"guests"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	p := s.Properties.Guests.Items.Properties
	if s.Schema != deploy.SchemaURI || !slices.Equal(p["nic"].Enum, []string{"rxe", "hicain"}) || !slices.Contains(p["link"].Enum, "ib") {
		t.Errorf("schema %s, nic %v, link %v", s.Schema, p["nic"].Enum, p["link"].Enum)
	}
}

// TestRackSpecErrorPlace: deploy rack's usage error for a bad spec
// names the file, the line and the key.
func TestRackSpecErrorPlace(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(spec, []byte("name: x\nguests:\n  - name: a\n    nic: foo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := shared.LoadRack(spec, "", "", "", false)
	want := spec + `:4: guests[0].nic: "foo" is not one of rxe, hicain`
	if err == nil || err.Error() != want || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("err %v\nwant the usage error %s", err, want)
	}
}
