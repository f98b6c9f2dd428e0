package godefs

import (
	"slices"
	"testing"
)

func TestGoName(t *testing.T) {
	for c, want := range map[string]string{
		"abi_major":      "ABIMajor",
		"dbrec_gpa":      "DBRecGPA",
		"max_qp_rd_atom": "MaxQPRdAtom",
		"n_ipv4":         "NIPv4",
		"vl15_dropped":   "VL15Dropped",
		"cmd_ring_gpa":   "CmdRingGPA",
		"wr_id":          "WRID",
		"timestamp":      "Timestamp",
	} {
		if got := GoName(c); got != want {
			t.Errorf("GoName(%q) = %q, want %q", c, got, want)
		}
	}
}

// TestTopFields: cgo -godefs lays an anonymous union out as its first
// member; a named one is one field.
func TestTopFields(t *testing.T) {
	body := `
	unsigned short opcode;
	unsigned int cmd_id;
	unsigned char mac[6];
	unsigned int rsvd1[2][3];
	union { unsigned char raw[224]; struct a reg_mr; };
	union { struct { unsigned short pkey_index; unsigned short slid; }; unsigned long long tm_tag; };
	union { struct b x; unsigned char raw[48]; } args;
	struct hicain_ah_attr ah_attr;
`
	want := []string{"opcode", "cmd_id", "mac", "rsvd1", "raw", "pkey_index", "args", "ah_attr"}
	if got := topFields(body); !slices.Equal(got, want) {
		t.Errorf("topFields = %q, want %q", got, want)
	}
}

func TestBlank(t *testing.T) {
	o, err := parseOptions([]byte("//godefs:blank rsvd* !Keep.rsvd\n//godefs:name raw Payload\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ, field string
		want       bool
	}{
		{"Hdr", "rsvd0", true},
		{"Hdr", "rsvd", true},
		{"Keep", "rsvd", false},
		{"Keep", "rsvd1", true},
		{"Hdr", "caps", false},
	} {
		if got := o.isBlank(c.typ, c.field); got != c.want {
			t.Errorf("isBlank(%s, %s) = %v, want %v", c.typ, c.field, got, c.want)
		}
	}
	if o.names["raw"] != "Payload" {
		t.Errorf("names = %v", o.names)
	}
	if _, err := parseOptions([]byte("//godefs:name raw\n")); err == nil {
		t.Error("a //godefs:name without a Go name parsed")
	}
}
