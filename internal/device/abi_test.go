package device

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// abiStructs maps each Go mirror to its C struct in kernel/hicain_abi.h.
var abiStructs = []struct {
	c string
	v any
}{
	{"hicain_dev_hdr", DevHdr{}},
	{"hicain_ah_attr", AHAttr{}},
	{"hicain_qp_attr", QPAttr{}},
	{"hicain_cmd_reg_mr", CmdRegMRArgs{}},
	{"hicain_cmd_create_cq", CmdCreateCQArgs{}},
	{"hicain_cmd_create_qp", CmdCreateQPArgs{}},
	{"hicain_cmd_modify_qp", CmdModifyQPArgs{}},
	{"hicain_cmd_create_ah", CmdCreateAHArgs{}},
	{"hicain_cmd_set_addr", CmdSetAddrArgs{}},
	{"hicain_cmd_create_srq", CmdCreateSRQArgs{}},
	{"hicain_cmd_modify_srq", CmdModifySRQArgs{}},
	{"hicain_srq_attr", SRQAttr{}},
	{"hicain_cmd_mcast", CmdMcastArgs{}},
	{"hicain_cmd_mad_ifc", CmdMADIfcArgs{}},
	{"hicain_cmd_port_cap", CmdPortCapArgs{}},
	{"hicain_cmd_alloc_mw", CmdAllocMWArgs{}},
	{"hicain_admin_cmd", AdminCmd{}},
	{"hicain_admin_cqe", AdminCQE{}},
	{"hicain_device_attr", DeviceAttr{}},
	{"hicain_port_attr", PortAttr{}},
	{"hicain_port_counters", PortCounters{}},
	{"hicain_eqe", EQE{}},
	{"hicain_l2_desc", L2Desc{}},
	{"hicain_wq_dbrec", WQDBRec{}},
	{"hicain_cq_dbrec", CQDBRec{}},
	{"hicain_sge", SGE{}},
	{"hicain_send_wqe", SendWQE{}},
	{"hicain_wqe_av", WQEAV{}},
	{"hicain_recv_wqe", RecvWQE{}},
	{"hicain_cqe", CQE{}},
}

// abiConsts are the numeric constants compared with the header's macros
// and enumerators.
var abiConsts = map[string]int64{
	"HICAIN_SL_ROCE_IPV4": rdma.SLRoCEIPv4, "HICAIN_SL_ROCE_IPV6": rdma.SLRoCEIPv6,
	"HICAIN_MAGIC": Magic, "HICAIN_ABI_MAJOR": ABIMajor, "HICAIN_ABI_MINOR": ABIMinor,
	"HICAIN_VENDOR_ID": VendorID, "HICAIN_DEVICE_ID": DeviceID, "HICAIN_BAR2_MIN_SIZE": BAR2Min,
	"HICAIN_ADMIN_SQ_OFF": AdminSQOff, "HICAIN_ADMIN_SQ_ENTRIES": AdminSQEntries,
	"HICAIN_ADMIN_CQ_OFF": AdminCQOff, "HICAIN_ADMIN_CQ_ENTRIES": AdminCQEntries,
	"HICAIN_EQ_OFF": EQOff, "HICAIN_EQ_ENTRIES": EQEntries,
	"HICAIN_L2_TX_OFF": L2TxOff, "HICAIN_L2_TX_ENTRIES": L2TxEntries,
	"HICAIN_L2_RX_OFF": L2RxOff, "HICAIN_L2_RX_ENTRIES": L2RxEntries, "HICAIN_L2_MAX_FRAME": L2MaxFrame,
	"HICAIN_DB_CTRL": DBCtrl, "HICAIN_DB_QP": DBQP, "HICAIN_DB_L2": DBL2, "HICAIN_DB_CQ": DBCQ, "HICAIN_NUM_DB": NumDB,
	"HICAIN_IRQ_CTRL": IRQCtrl, "HICAIN_IRQ_L2": IRQL2, "HICAIN_IRQ_CQ_BASE": IRQCQBase,
	"HICAIN_DEV_READY": DevReady, "HICAIN_DEV_LIVE": DevLive, "HICAIN_DEV_FATAL": DevFatal, "HICAIN_DEV_LINK_UP": DevLinkUp,
	"HICAIN_DRV_OK": DrvOK, "HICAIN_DRV_MSIX_ON": DrvMSIXOn, "HICAIN_DRV_RESET": DrvReset,
	"HICAIN_FATAL_ADMIN_RING": FatalAdminRing, "HICAIN_FATAL_L2_RING": FatalL2Ring, "HICAIN_FATAL_ABI": FatalABI,
	"HICAIN_CAP_RC": CapRC, "HICAIN_CAP_UD": CapUD, "HICAIN_CAP_SRQ": CapSRQ, "HICAIN_CAP_ATOMIC": CapAtomic, "HICAIN_CAP_L2": CapL2, "HICAIN_CAP_XRC": CapXRC,
	"HICAIN_CQ_F_PAGED": CQFPaged, "HICAIN_CQ_PAGE_SIZE": CQPageSize, "HICAIN_CQ_MAX_PAGES": CQMaxPages,
	"HICAIN_LINK_ETHERNET": LinkEthernet, "HICAIN_LINK_INFINIBAND": LinkInfiniBand,
	"HICAIN_CMD_QUERY_DEVICE": CmdQueryDevice, "HICAIN_CMD_REG_MR": CmdRegMR, "HICAIN_CMD_CREATE_QP": CmdCreateQP,
	"HICAIN_CMD_MODIFY_QP": CmdModifyQP, "HICAIN_CMD_CREATE_AH": CmdCreateAH, "HICAIN_CMD_SET_ADDR": CmdSetAddr,
	"HICAIN_CMD_QUERY_COUNTERS": CmdQueryCounters, "HICAIN_CMD_MAX": CmdMax,
	"HICAIN_ST_ENOENT": StENOENT, "HICAIN_ST_EFAULT": StEFAULT, "HICAIN_ST_EINVAL": StEINVAL, "HICAIN_ST_EOPNOTSUPP": StEOPNOTSUPP,
	"HICAIN_EV_QP_FATAL": EvQPFatal, "HICAIN_EV_DEVICE_FATAL": EvDeviceFatal,
	"HICAIN_CMD_CREATE_SRQ": CmdCreateSRQ, "HICAIN_CMD_MODIFY_SRQ": CmdModifySRQ, "HICAIN_CMD_QUERY_SRQ": CmdQuerySRQ,
	"HICAIN_CMD_DESTROY_SRQ": CmdDestroySRQ, "HICAIN_CMD_ATTACH_MCAST": CmdAttachMcast,
	"HICAIN_CMD_DETACH_MCAST": CmdDetachMcast, "HICAIN_CMD_RESIZE_CQ": CmdResizeCQ,
	"HICAIN_SRQ_MAX_WR": SRQMaxWR, "HICAIN_SRQ_LIMIT": SRQLimit, "HICAIN_DEVICE_ATTR_V1_0_SIZE": DeviceAttrV10Size,
	"HICAIN_EV_PORT_ACTIVE": EvPortActive, "HICAIN_EV_PORT_ERR": EvPortErr, "HICAIN_EV_CQ_ERR": EvCQErr,
	"HICAIN_EV_SRQ_LIMIT": EvSRQLimit, "HICAIN_EV_QP_LAST_WQE": EvQPLastWQE, "HICAIN_EV_SRQ_ERR": EvSRQErr,
	"HICAIN_QP_FATAL_SQ_INDEX": QPFatalSQIndex, "HICAIN_QP_FATAL_RQ_INDEX": QPFatalRQIndex,
	"HICAIN_QP_FATAL_WQE": QPFatalWQE, "HICAIN_QP_FATAL_RING": QPFatalRing,
	"HICAIN_QP_FATAL_TRANSPORT": QPFatalTransport, "HICAIN_CQ_ERR_OVERRUN": CQErrOverrun,
	"HICAIN_CQ_ARM_NEXT": CQArmNext, "HICAIN_CQ_ARM_SOLICITED": CQArmSolicited, "HICAIN_SEND_INLINE": SendInline,
	"HICAIN_SEND_AV": SendAV, "HICAIN_CMD_MAD_IFC": CmdMADIfc, "HICAIN_CMD_SET_PORT_CAP": CmdSetPortCap, "HICAIN_CMD_REREG_MR": CmdReregMR,
	"HICAIN_CMD_ALLOC_MW": CmdAllocMW, "HICAIN_CMD_DEALLOC_MW": CmdDeallocMW, "HICAIN_WR_LOCAL_INV": WRLocalInv,
	"HICAIN_WR_BIND_MW": WRBindMW, "HICAIN_WR_SEND_INV": WRSendInv,
	"HICAIN_WR_ATOMIC_WRITE": WRAtomicWrite, "HICAIN_WC_WITH_INV": WCWithInv,
	"HICAIN_CMD_ALLOC_XRCD": CmdAllocXRCD, "HICAIN_CMD_DEALLOC_XRCD": CmdDeallocXRCD, "HICAIN_SRQT_BASIC": SRQTBasic, "HICAIN_SRQT_XRC": SRQTXRC, "HICAIN_EV_LID_CHANGE": EvLIDChange,
	"HICAIN_EV_SM_CHANGE": EvSMChange, "HICAIN_EV_CLIENT_REREGISTER": EvClientReregister,
	"HICAIN_MAD_SIZE": MADSize, "HICAIN_MAD_IFC_REPLY": MADIfcReply,
}

// goLayout lists "struct.field offset size" for every field of the Go
// mirrors, plus "struct sizeof N".
func goLayout() []string {
	var out []string
	for _, s := range abiStructs {
		t := reflect.TypeOf(s.v)
		for i := range t.NumField() {
			f := t.Field(i)
			out = append(out, fmt.Sprintf("%s.%s %d %d", s.c, f.Tag.Get("c"), f.Offset, f.Type.Size()))
		}
		out = append(out, fmt.Sprintf("%s sizeof %d", s.c, t.Size()))
	}
	return out
}

func cProgram() string {
	var b strings.Builder
	b.WriteString("#include <stddef.h>\n#include <stdio.h>\n#include \"hicain_abi.h\"\n")
	b.WriteString("#define F(s, f) printf(#s \".\" #f \" %zu %zu\\n\", offsetof(struct s, f), sizeof(((struct s *)0)->f))\n")
	b.WriteString("#define S(s) printf(#s \" sizeof %zu\\n\", sizeof(struct s))\n")
	b.WriteString("#define C(c) printf(#c \" %lld\\n\", (long long)(c))\n")
	b.WriteString("int main(void)\n{\n")
	for _, s := range abiStructs {
		t := reflect.TypeOf(s.v)
		for i := range t.NumField() {
			fmt.Fprintf(&b, "\tF(%s, %s);\n", s.c, t.Field(i).Tag.Get("c"))
		}
		fmt.Fprintf(&b, "\tS(%s);\n", s.c)
	}
	for _, k := range sortedKeys(abiConsts) {
		fmt.Fprintf(&b, "\tC(%s);\n", k)
	}
	b.WriteString("\treturn 0;\n}\n")
	return b.String()
}

func sortedKeys(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// TestABILayout fails when kernel/hicain_abi.h and the Go mirror drift:
// it builds a C program with gcc against the header that prints the
// offset and size of every field and the value of every constant.
func TestABILayout(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("HINIC_REQUIRE_TOOLS") == "1" {
			t.Fatalf("gcc not found (apt-get install gcc): %v", err)
		}
		t.Skip("gcc not found; install gcc or set HINIC_REQUIRE_TOOLS=1 to fail")
	}
	_, file, _, _ := runtime.Caller(0)
	inc := filepath.Join(filepath.Dir(file), "..", "..", "kernel")
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(src, []byte(cProgram()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command(cc, "-std=gnu11", "-Wall", "-Werror", "-I", inc, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	for _, l := range goLayout() {
		k, v, _ := strings.Cut(l, " ")
		if got[k] != v {
			t.Errorf("%s: C %q, Go %q", k, got[k], v)
		}
	}
	for k, v := range abiConsts {
		if got[k] != fmt.Sprint(v) {
			t.Errorf("%s: C %s, Go %d", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("C output:\n%s", bytes.TrimSpace(out))
	}
}
