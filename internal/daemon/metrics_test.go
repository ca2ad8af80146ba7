package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// The collector's exposition for a known state of the maps (a fake
// dataplane), exactly.
func TestMetricsExposition(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2") + "\n" + `[[bridge]]
name = "br1"
filter = true
default = "block"
[[bridge.port]]
interface = "q1"
[[bridge.rule]]
action = "pass"
ethertype = "arp"
`)
	p1, p2, q1 := w.port("br0", "p1"), w.port("br0", "p2"), w.port("br1", "q1")
	var s1, s2 tbpf.PortStats
	s1.C[tbpf.RxPackets], s1.C[tbpf.RxBytes], s1.C[tbpf.TxPackets], s1.C[tbpf.Learned], s1.C[tbpf.Moved] = 10, 1000, 7, 2, 1
	s1.Drops[tbpf.TrestleTrDropReasonTR_DROP_RUNT] = 3
	s2.C[tbpf.RxPackets], s2.C[tbpf.Flooded] = 8, 4
	s2.Drops[tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN] = 5
	var unattached tbpf.PortStats
	unattached.Drops[tbpf.TrestleTrDropReasonTR_DROP_NO_PORT] = 9
	w.dp.stats = map[uint16]tbpf.PortStats{0: unattached, p1.slot: s1, p2.slot: s2}
	w.dp.filterCount = map[uint16]datapath.FilterCounts{w.d.bridges["br1"].id: {
		Rules: []datapath.FilterCount{{Packets: 6, Bytes: 360}}, Default: datapath.FilterCount{Packets: 2, Bytes: 200}}}
	w.dp.filterUnread = map[uint16]datapath.FilterUnread{w.d.bridges["br1"].id: {Fragment: 4, ExtHeaders: 1}}
	w.dp.learn(w.d.bridges["br0"].id, p1.slot, p1.ifindex, "02:00:00:00:00:01", 0)
	w.dp.learn(w.d.bridges["br0"].id, p2.slot, p2.ifindex, "02:00:00:00:00:02", 0)
	w.d.aged["br0"] = 11
	w.d.reloads[true], w.d.reloads[false] = 2, 1
	_ = q1
	w.dp.eventsLost = 3
	vlan, sup := uint16(0), uint64(41)
	w.d.events.emit(ctl.Event{Event: ctl.EventMACMove, Bridge: "br0", MAC: "02:00:00:00:00:01", VLAN: &vlan, From: "p1", To: "p2", Suppressed: &sup})
	w.d.events.emit(ctl.Event{Event: ctl.EventMACMoveOverflow, Count: 5})

	// Drops: every reason of every port is there from the start, so
	// that rate() has a series before the first drop.
	var drops strings.Builder
	for _, port := range []struct {
		name string
		s    tbpf.PortStats
	}{{"p1", s1}, {"p2", s2}} {
		for i, r := range tbpf.DropNames() {
			fmt.Fprintf(&drops, "trestle_port_drops_total{bridge=\"br0\",port=%q,reason=%q} %d\n", port.name, r, port.s.Drops[i])
		}
	}
	for _, r := range tbpf.DropNames() {
		fmt.Fprintf(&drops, "trestle_port_drops_total{bridge=\"br1\",port=\"q1\",reason=%q} 0\n", r)
	}
	want := `# HELP trestle_port_rx_packets_total Frames received on the port, counted before any drop.
# TYPE trestle_port_rx_packets_total counter
trestle_port_rx_packets_total{bridge="br0",port="p1"} 10
trestle_port_rx_packets_total{bridge="br0",port="p2"} 8
trestle_port_rx_packets_total{bridge="br1",port="q1"} 0
# HELP trestle_port_tx_packets_total Frames sent out of the port (forwarded, flooded or mirrored to it).
# TYPE trestle_port_tx_packets_total counter
trestle_port_tx_packets_total{bridge="br0",port="p1"} 7
trestle_port_tx_packets_total{bridge="br0",port="p2"} 0
trestle_port_tx_packets_total{bridge="br1",port="q1"} 0
# HELP trestle_port_flooded_total Frames received on the port that its bridge flooded to its other ports.
# TYPE trestle_port_flooded_total counter
trestle_port_flooded_total{bridge="br0",port="p1"} 0
trestle_port_flooded_total{bridge="br0",port="p2"} 4
trestle_port_flooded_total{bridge="br1",port="q1"} 0
# HELP trestle_fdb_learned_total Source addresses learned on the port.
# TYPE trestle_fdb_learned_total counter
trestle_fdb_learned_total{bridge="br0",port="p1"} 2
trestle_fdb_learned_total{bridge="br0",port="p2"} 0
trestle_fdb_learned_total{bridge="br1",port="q1"} 0
# HELP trestle_fdb_moved_total Learned addresses that moved to the port from another port of its bridge.
# TYPE trestle_fdb_moved_total counter
trestle_fdb_moved_total{bridge="br0",port="p1"} 1
trestle_fdb_moved_total{bridge="br0",port="p2"} 0
trestle_fdb_moved_total{bridge="br1",port="q1"} 0
# HELP trestle_fdb_entries Learned addresses in the bridge's forwarding table (static entries apart): what max_entries limits.
# TYPE trestle_fdb_entries gauge
trestle_fdb_entries{bridge="br0"} 2
trestle_fdb_entries{bridge="br1"} 0
# HELP trestle_fdb_aged_total Learned addresses removed after their aging time without traffic, since the daemon started.
# TYPE trestle_fdb_aged_total counter
trestle_fdb_aged_total{bridge="br0"} 11
trestle_fdb_aged_total{bridge="br1"} 0
# HELP trestle_port_up 1 if the port forwards: attached (mode xdp, tc or patch) and its interface up with carrier; 0 otherwise (mode none: not attached).
# TYPE trestle_port_up gauge
trestle_port_up{bridge="br0",mode="tc",port="p1"} 1
trestle_port_up{bridge="br0",mode="tc",port="p2"} 1
trestle_port_up{bridge="br1",mode="none",port="q1"} 0
# HELP trestle_filter_packets_total Frames the bridge's filter decided, by rule: its number in ` + "`trestle rule show`" + `, state (passed as part of a tracked connection) or default.
# TYPE trestle_filter_packets_total counter
trestle_filter_packets_total{action="block",bridge="br1",rule="default"} 2
trestle_filter_packets_total{action="pass",bridge="br1",rule="1"} 6
trestle_filter_packets_total{action="pass",bridge="br1",rule="state"} 0
# HELP trestle_filter_unread_total Frames whose transport header the bridge's filter could not read, so that they matched only rules without port or ICMP keys, by reason: fragment (not the first), ext_headers (too many IPv6 extension headers), truncated.
# TYPE trestle_filter_unread_total counter
trestle_filter_unread_total{bridge="br1",reason="ext_headers"} 1
trestle_filter_unread_total{bridge="br1",reason="fragment"} 4
trestle_filter_unread_total{bridge="br1",reason="truncated"} 0
# HELP trestle_config_reloads_total Reloads of the config (SIGHUP, trestle reload, systemctl reload), by result: applied, or rejected with the running state kept.
# TYPE trestle_config_reloads_total counter
trestle_config_reloads_total{result="applied"} 2
trestle_config_reloads_total{result="rejected"} 1
# HELP trestle_unattached_drops_total Frames dropped before they had a port: from an interface that is no port of any bridge.
# TYPE trestle_unattached_drops_total counter
` + unattachedLines(9) + `# HELP trestle_port_drops_total Frames received on the port and dropped, by reason (docs/operations.md lists the reasons).
# TYPE trestle_port_drops_total counter
` + drops.String() + `# HELP trestle_events_total Events logged (and shown by ` + "`trestle events`" + `) since the daemon started, by kind.
# TYPE trestle_events_total counter
trestle_events_total{event="guard"} 0
trestle_events_total{event="guard_end"} 0
trestle_events_total{event="mac_frozen"} 0
trestle_events_total{event="mac_frozen_end"} 0
trestle_events_total{event="mac_limit"} 0
trestle_events_total{event="mac_limit_end"} 0
trestle_events_total{event="mac_move"} 1
trestle_events_total{event="mac_move_overflow"} 1
trestle_events_total{event="neigh_refused"} 0
trestle_events_total{event="port_blocked"} 0
trestle_events_total{event="port_down"} 1
trestle_events_total{event="port_up"} 2
trestle_events_total{event="table_full"} 0
trestle_events_total{event="table_full_end"} 0
# HELP trestle_events_suppressed_total Events not logged one by one since the daemon started, counted in another line instead (mac_move: moves of a flapping address), by kind.
# TYPE trestle_events_suppressed_total counter
trestle_events_suppressed_total{event="mac_move"} 46
# HELP trestle_events_lost_total Events the datapath could not hand to the daemon: its event ring was full (the daemon behind, or not running).
# TYPE trestle_events_lost_total counter
trestle_events_lost_total 3
`
	names := []string{"trestle_events_total", "trestle_events_suppressed_total", "trestle_events_lost_total", "trestle_port_rx_packets_total", "trestle_port_tx_packets_total", "trestle_port_flooded_total",
		"trestle_fdb_learned_total", "trestle_fdb_moved_total", "trestle_fdb_entries", "trestle_fdb_aged_total",
		"trestle_port_up", "trestle_filter_packets_total", "trestle_filter_unread_total", "trestle_config_reloads_total",
		"trestle_unattached_drops_total", "trestle_port_drops_total"}
	if err := testutil.CollectAndCompare(newCollector(w.d), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// Every counter of the enum is a metric, with the names the issue and
	// the dashboard use for the known ones.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newCollector(w.d))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, n := range tbpf.CounterNames() {
		name, _ := portCounterMetric(n)
		if !got[name] {
			t.Errorf("counter %s: no metric %s", n, name)
		}
	}
	for _, n := range []string{"trestle_port_rx_bytes_total", "trestle_port_tx_bytes_total", "trestle_port_unlearned_total",
		"trestle_fdb_max_entries", "trestle_filter_bytes_total", "trestle_build_info"} {
		if !got[n] {
			t.Errorf("no metric %s", n)
		}
	}
	// A help text for a counter the enum no longer has would be stale.
	names2 := map[string]bool{}
	for _, n := range tbpf.CounterNames() {
		names2[n] = true
	}
	for n := range counterMetrics {
		if !names2[n] {
			t.Errorf("counterMetrics names %q, which enum tr_counter does not have", n)
		}
	}
}

func unattachedLines(noPort uint64) string {
	var b strings.Builder
	for i, r := range tbpf.DropNames() {
		v := uint64(0)
		if tbpf.DropReason(i) == tbpf.TrestleTrDropReasonTR_DROP_NO_PORT {
			v = noPort
		}
		fmt.Fprintf(&b, "trestle_unattached_drops_total{reason=%q} %d\n", r, v)
	}
	return b.String()
}

// The endpoint serves the text format with the build and the process's own
// metrics beside trestle's.
func TestMetricsEndpoint(t *testing.T) {
	w := newWorld(t)
	w.sys.add("p1", "veth")
	w.mustApply(bridges("br0=p1"))
	Build = "v-test"
	m, err := w.d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	resp, err := http.Get("http://" + m.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, re := range []string{
		`trestle_build_info\{goversion="go[^"]+",version="v-test"\} 1`,
		`trestle_port_up\{bridge="br0",mode="tc",port="p1"\} 1`,
		`process_resident_memory_bytes \d`,
		`go_goroutines \d`,
	} {
		if !regexp.MustCompile(re).Match(body) {
			t.Errorf("no line matching %s in:\n%s", re, body)
		}
	}
	if _, err := w.d.serveMetrics(m.addr); err == nil || !strings.Contains(err.Error(), "metrics: listen tcp "+m.addr) {
		t.Errorf("a second endpoint on %s: %v, want an error naming it", m.addr, err)
	}
}

// The Grafana dashboard (docs/grafana-trestle.json) queries only metrics
// the daemon exports, and shows every one the issue names.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-trestle.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana-trestle.json: %v", err)
	}
	exported := exportedNames(t)
	name := regexp.MustCompile(`\b(trestle|process|go)_[a-z0-9_]+\b`)
	used := map[string]bool{}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			used[n] = true
			if !exported[n] {
				t.Errorf("the dashboard queries %s, which the daemon does not export: %s", n, e)
			}
		}
	}
	for _, n := range []string{"trestle_port_rx_packets_total", "trestle_port_tx_packets_total", "trestle_port_rx_bytes_total",
		"trestle_port_tx_bytes_total", "trestle_port_drops_total", "trestle_fdb_entries", "trestle_fdb_learned_total",
		"trestle_fdb_moved_total", "trestle_fdb_aged_total", "trestle_port_up", "trestle_vlan_rx_packets_total",
		"trestle_filter_packets_total", "trestle_build_info"} {
		if !used[n] {
			t.Errorf("the dashboard has no panel of %s", n)
		}
	}
}

// The example alerting rules (docs/trestle-alerts.yml) pass promtool and
// use metrics the daemon exports.
func TestAlertRules(t *testing.T) {
	const file = "../../docs/trestle-alerts.yml"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedNames(t)
	for _, n := range regexp.MustCompile(`\btrestle_[a-z0-9_]+\b`).FindAllString(string(b), -1) {
		if !exported[n] {
			t.Errorf("%s names %s, which the daemon does not export", file, n)
		}
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("no promtool (Debian package prometheus; make test installs it)")
	}
	if out, err := exec.Command("promtool", "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", file, err, out)
	}
}

// exportedNames are the metric names the daemon's registry describes.
func exportedNames(t *testing.T) map[string]bool {
	exported := map[string]bool{}
	descs := make(chan *prometheus.Desc, 1000)
	newCollector(newWorld(t).d).Describe(descs)
	collectors.NewGoCollector().Describe(descs)
	collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}).Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			exported[m[1]] = true
		}
	}
	return exported
}

// An address with no host binds the loopback address, never every
// interface: the endpoint has no authentication.
func TestMetricsDefaultLoopback(t *testing.T) {
	for in, want := range map[string]string{
		":9470":          "127.0.0.1:9470",
		"0.0.0.0:9470":   "0.0.0.0:9470",
		"[::1]:9470":     "[::1]:9470",
		"10.0.0.1:9470":  "10.0.0.1:9470",
		"localhost:9470": "localhost:9470",
	} {
		if got := metricsListenAddr(in); got != want {
			t.Errorf("metricsListenAddr(%q) = %q, want %q", in, got, want)
		}
	}
	w := newWorld(t)
	m, err := w.d.serveMetrics(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	if !strings.HasPrefix(m.addr, "127.0.0.1:") {
		t.Errorf("metrics = \":0\" listens on %s, want the loopback address", m.addr)
	}
}

// Slow clients (a request header never finished, as a slowloris sends)
// hold neither the endpoint nor the daemon: a scrape beside them is
// answered, the daemon's lock is free, and each is cut off after the read
// timeout.
func TestMetricsSlowClients(t *testing.T) {
	old := metricsReadTimeout
	metricsReadTimeout = 300 * time.Millisecond
	defer func() { metricsReadTimeout = old }()
	w := newWorld(t)
	w.sys.add("p1", "veth")
	w.mustApply(bridges("br0=p1"))
	m, err := w.d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	var slow []net.Conn
	for i := 0; i < 8; i++ {
		c, err := net.Dial("tcp", m.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + m.addr + "/metrics")
	if err != nil {
		t.Fatalf("a scrape beside 8 slow clients: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `trestle_port_up{bridge="br0"`) {
		t.Fatalf("a scrape beside 8 slow clients: status %d:\n%s", resp.StatusCode, body)
	}
	if !w.d.mu.TryLock() {
		t.Fatal("the daemon's lock is held while slow clients are connected")
	}
	w.d.mu.Unlock()
	for i, c := range slow {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(make([]byte, 512))
		if err == nil && n > 0 {
			continue // the server's 408 before it closes: cut off too
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("slow client %d still connected after 10 s (read timeout %v)", i, metricsReadTimeout)
		}
	}
}

// A scrape reads what the datapath keeps in Go (its VLANs' counter
// indexes, its rule sets' counter ids) under the daemon's lock only: an
// apply writes those maps under it, and a scrape reading one beside that
// write stops the daemon ("concurrent map read and map write"). The maps
// themselves are read after the lock is released.
func TestMetricsScrapeReadsDatapathRecordUnderLock(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "q1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(`[[bridge]]
name = "br0"
[[bridge.port]]
interface = "p1"
vlan = 10
[[bridge.port]]
interface = "p2"
trunk = [10]
[[bridge]]
name = "br1"
filter = true
[[bridge.port]]
interface = "q1"
[[bridge.rule]]
action = "pass"
ethertype = "arp"
`)
	w.dp.filterCount = map[uint16]datapath.FilterCounts{w.d.bridges["br1"].id: {Rules: []datapath.FilterCount{{Packets: 6, Bytes: 360}}}}
	w.dp.fakeCounters.lock = &w.d.mu
	n, err := testutil.GatherAndCount(w.d.registry(), "trestle_filter_packets_total", "trestle_vlan_rx_packets_total")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("the scrape gave no filter or VLAN series")
	}
	if len(w.dp.unlocked) > 0 {
		t.Errorf("a scrape read the datapath's own record without the daemon's lock: %v", w.dp.unlocked)
	}
}

// A reload that changes daemon.metrics moves the endpoint there (the new
// one listening before the old stops), or stops it when it is no longer
// set; one that cannot listen where it is asked keeps the endpoint as it
// was.
func TestMetricsFollowReload(t *testing.T) {
	w := newWorld(t)
	// As a reload does, under the lock (a scrape takes it too).
	moveTo := func(addr string) {
		w.d.mu.Lock()
		defer w.d.mu.Unlock()
		w.d.moveMetrics(addr)
	}
	serves := func(addr string) bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	moveTo("127.0.0.1:0")
	first := w.d.metrics
	if first == nil || !serves(first.addr) {
		t.Fatalf("daemon.metrics set at a reload: no endpoint (%+v)", first)
	}
	moveTo("localhost:0")
	second := w.d.metrics
	if second == nil || second == first || !serves(second.addr) {
		t.Fatalf("daemon.metrics changed: endpoint %+v, was %+v", second, first)
	}
	if serves(first.addr) {
		t.Errorf("the endpoint at %s still serves after it moved", first.addr)
	}
	moveTo("localhost:0")
	if w.d.metrics != second {
		t.Errorf("daemon.metrics unchanged: the endpoint moved")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	moveTo(taken.Addr().String())
	if w.d.metrics != second || !serves(second.addr) {
		t.Errorf("daemon.metrics on a port in use: the endpoint did not stay as it was")
	}
	moveTo("")
	if w.d.metrics != nil || serves(second.addr) {
		t.Errorf("daemon.metrics no longer set: the endpoint still serves")
	}
}
