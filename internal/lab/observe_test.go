package lab

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TestLearningFrames: n broadcast frames from n addresses counting up in
// the low 24 bits, with the lab's learning ethertype.
func TestLearningFrames(t *testing.T) {
	fs := LearningFrames(net.HardwareAddr{2, 0xb0, 1, 0, 0, 0xfe}, 3)
	want := []string{"02:b0:01:00:00:fe", "02:b0:01:00:00:ff", "02:b0:01:00:01:00"}
	for i, f := range fs {
		if len(f) != 60 || net.HardwareAddr(f[6:12]).String() != want[i] || f[0] != 0xff || f[12] != 0x88 || f[13] != 0xb5 {
			t.Errorf("frame %d: %x", i, f)
		}
	}
	if got := MACPlus(net.HardwareAddr{0x0e, 0x5a, 0, 0xff, 0xff, 0xff}, 1).String(); got != "0e:5a:00:00:00:00" {
		t.Errorf("MACPlus wraps within the low 24 bits: %s", got)
	}
}

// TestTableParsers: each DUT's table as its tools print it.
func TestTableParsers(t *testing.T) {
	stats := `Statistics for bridge "br1":
  Current/maximum MAC entries in the table: 65536/65536
  Current static MAC entries in the table : 4
  Total number of learned MAC entries     : 70531
  Total number of expired MAC entries     : 0
  Total number of evicted MAC entries     : 4995
  Total number of port moved MAC entries  : 0
`
	tr, err := parseOVSStats(stats)
	if err != nil || tr.Learned != 65532 || tr.Entries != 65536 || tr.Evicted != 4995 {
		t.Errorf("parseOVSStats: %+v %v", tr, err)
	}
	if _, err := parseOVSStats("ovs-appctl: no such bridge"); err == nil {
		t.Errorf("parseOVSStats took an answer without a size")
	}

	fdb := ` port  VLAN  MAC                Age
    1     0  0e:5a:00:00:00:01  static
    2     0  02:00:00:00:00:01    3
    1     0  02:b0:00:00:00:05    0
`
	names := "65534,brs\n1,q1\n1,p2\n65534,br1\n2,p1\n2,q2\n"
	m := parseOVSFDB(fdb, names, []string{"p1", "p2"})
	if len(m) != 3 || m["0e:5a:00:00:00:01"] != (FDBEntry{"p2", true}) || m["02:00:00:00:00:01"] != (FDBEntry{"p1", false}) {
		t.Errorf("parseOVSFDB for br1: %v", m)
	}
	if m := parseOVSFDB(fdb, names, []string{"q1", "q2"}); m["02:b0:00:00:00:05"] != (FDBEntry{"q1", false}) {
		t.Errorf("parseOVSFDB for brs, whose port 1 is q1: %v", m)
	}

	js := `[{"mac":"02:00:00:00:00:01","ifname":"p1","master":"br1","state":""},
{"mac":"0E:5A:00:00:00:01","ifname":"p2","master":"br1","state":"static"},
{"mac":"aa:bb:cc:dd:ee:ff","ifname":"p1","vlan":1,"flags":["self"],"state":"permanent"},
{"mac":"12:34:56:78:9a:bc","ifname":"br1","master":"br1","state":"permanent"}]`
	bm, err := parseBridgeFDB(js, "br1")
	if err != nil || len(bm) != 2 || bm["0e:5a:00:00:00:01"] != (FDBEntry{"p2", true}) || bm["02:00:00:00:00:01"] != (FDBEntry{"p1", false}) {
		t.Errorf("parseBridgeFDB: %v %v", bm, err)
	}

	// IFLA_LINKINFO { IFLA_INFO_KIND, IFLA_INFO_DATA { ..., N_LEARNED, MAX_LEARNED } }.
	info := nl.NewRtAttr(unix.IFLA_LINKINFO|unix.NLA_F_NESTED, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA|unix.NLA_F_NESTED, nil)
	data.AddRtAttr(unix.IFLA_BR_AGEING_TIME, nl.Uint32Attr(30000))
	data.AddRtAttr(unix.IFLA_BR_FDB_N_LEARNED, nl.Uint32Attr(4096))
	data.AddRtAttr(unix.IFLA_BR_FDB_MAX_LEARNED, nl.Uint32Attr(65536))
	mtu := nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(1500))
	msg := append(mtu.Serialize(), info.Serialize()...)
	n, limit, ok, err := parseBridgeLearned(msg)
	if err != nil || !ok || n != 4096 || limit != 65536 {
		t.Errorf("parseBridgeLearned: %d %d %v %v", n, limit, ok, err)
	}
	old := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	old.AddRtAttr(nl.IFLA_INFO_DATA, nil).AddRtAttr(unix.IFLA_BR_AGEING_TIME, nl.Uint32Attr(30000))
	if _, _, ok, err := parseBridgeLearned(old.Serialize()); ok || err != nil {
		t.Errorf("a kernel without the attributes: ok %v, %v", ok, err)
	}
}

// TestCPUOthers: /proc/PID/stat read past a command with spaces and
// parentheses, with the time of the children it waited for; kernel
// threads told apart; and the machine's others read.
func TestCPUOthers(t *testing.T) {
	p, kernel, ok := ParseProcStat("4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 5 20 0 1 0 5 0 0")
	if !ok || kernel || p.ppid != 17 || p.Ticks != 292 {
		t.Errorf("parseProcStat: %+v kernel %v ok %v", p, kernel, ok)
	}
	if _, kernel, _ := ParseProcStat("22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 2742 0 0 20 0 1 0 13 0 0"); !kernel {
		t.Errorf("ksoftirqd is a kernel thread")
	}
	if _, _, ok := ParseProcStat("9 (x) S 1"); ok {
		t.Errorf("a short line parsed")
	}
	if _, err := CPUOthers(); err != nil {
		t.Error(err)
	}
}
