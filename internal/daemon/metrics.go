package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// The Prometheus endpoint ([daemon] metrics, --metrics). The collector reads
// the datapath's per-CPU maps when Prometheus scrapes, after copying what
// it needs of the daemon's state under the daemon's lock (scrape), and keeps
// nothing between scrapes: no polling loop.
//
// Port and VLAN counters are named after the enums of bpf/types.h: a counter
// added there is exported as trestle_port_<name>_total with no change here.
// These give the known ones their own names and help texts.
var counterMetrics = map[string]struct{ name, help string }{
	"rx_packets":     {"trestle_port_rx_packets_total", "Frames received on the port, counted before any drop."},
	"rx_bytes":       {"trestle_port_rx_bytes_total", "Bytes of the frames received on the port."},
	"tx_packets":     {"trestle_port_tx_packets_total", "Frames sent out of the port (forwarded, flooded or mirrored to it)."},
	"tx_bytes":       {"trestle_port_tx_bytes_total", "Bytes of the frames sent out of the port."},
	"flooded":        {"trestle_port_flooded_total", "Frames received on the port that its bridge flooded to its other ports."},
	"learned":        {"trestle_fdb_learned_total", "Source addresses learned on the port."},
	"moved":          {"trestle_fdb_moved_total", "Learned addresses that moved to the port from another port of its bridge."},
	"unlearned":      {"trestle_port_unlearned_total", "Frames from new sources forwarded without learning them (mac_limit_action forward, at max_macs; or the bridge's table refused them)."},
	"unlearned_full": {"trestle_port_unlearned_full_total", "Of the unlearned, the new sources the bridge's table refused: full, or past its high-water mark with the port at its fair share."},
	"tx_dropped":     {"trestle_port_tx_dropped_total", "Copies of flooded frames for the port that could not be sent (a tc clone the kernel refused: longer than the port's MTU allows, say)."},
	"grouped":        {"trestle_port_grouped_total", "Of the flooded, the multicast frames sent only to their group's member ports and the multicast router ports (multicast_snooping)."},
	"encap":          {"trestle_port_encap_total", "Of the frames sent out of an overlay port, those the datapath (the XDP or tc program) encapsulated itself and sent into the underlay (docs/overlay.md); the vxlan device does not count them."},
}

var vlanMetrics = map[string]string{
	"rx_packets": "Frames classified into the VLAN.",
	"rx_bytes":   "Bytes of the frames classified into the VLAN.",
	"tx_packets": "Copies sent out of ports in the VLAN.",
	"tx_bytes":   "Bytes of the copies sent out of ports in the VLAN.",
	"flooded":    "Frames flooded within the VLAN.",
}

func portCounterMetric(name string) (string, string) {
	if m, ok := counterMetrics[name]; ok {
		return m.name, m.help
	}
	return "trestle_port_" + name + "_total", "Port counter " + name + " (enum tr_counter in bpf/types.h)."
}

func vlanCounterMetric(name string) (string, string) {
	help, ok := vlanMetrics[name]
	if !ok {
		help = "VLAN counter " + name + " (enum tr_vlan_counter in bpf/types.h)."
	}
	return "trestle_vlan_" + name + "_total", help
}

// Build is what `trestle --version` and trestle_build_info say.
var Build = "dev"

type collector struct {
	d *Daemon

	port, vlan                 []*prometheus.Desc // by counter index
	drops, unattached, up      *prometheus.Desc
	entries, maxEntries, aged  *prometheus.Desc
	filterPackets, filterBytes *prometheus.Desc
	filterUnread               *prometheus.Desc
	reloads, build             *prometheus.Desc
	events, suppressed, lost   *prometheus.Desc
	snoopMsgs, snoopLost       *prometheus.Desc
	neighClaims, neighLearned  *prometheus.Desc
}

func newCollector(d *Daemon) *collector {
	c := &collector{d: d}
	for _, n := range tbpf.CounterNames() {
		name, help := portCounterMetric(n)
		c.port = append(c.port, prometheus.NewDesc(name, help, []string{"bridge", "port"}, nil))
	}
	for _, n := range tbpf.VLANCounterNames() {
		name, help := vlanCounterMetric(n)
		c.vlan = append(c.vlan, prometheus.NewDesc(name, help, []string{"bridge", "vlan"}, nil))
	}
	c.drops = prometheus.NewDesc("trestle_port_drops_total", "Frames received on the port and dropped, by reason (docs/operations.md lists the reasons).", []string{"bridge", "port", "reason"}, nil)
	c.unattached = prometheus.NewDesc("trestle_unattached_drops_total", "Frames dropped before they had a port: from an interface that is no port of any bridge.", []string{"reason"}, nil)
	c.up = prometheus.NewDesc("trestle_port_up", "1 if the port forwards: attached (mode xdp, tc or patch) and its interface up with carrier; 0 otherwise (mode none: not attached).", []string{"bridge", "port", "mode"}, nil)
	c.entries = prometheus.NewDesc("trestle_fdb_entries", "Learned addresses in the bridge's forwarding table (static entries apart): what max_entries limits.", []string{"bridge"}, nil)
	c.maxEntries = prometheus.NewDesc("trestle_fdb_max_entries", "The bridge's max_entries: learned addresses it may hold.", []string{"bridge"}, nil)
	c.aged = prometheus.NewDesc("trestle_fdb_aged_total", "Learned addresses removed after their aging time without traffic, since the daemon started.", []string{"bridge"}, nil)
	c.filterPackets = prometheus.NewDesc("trestle_filter_packets_total", "Frames the bridge's filter decided, by rule: its number in `trestle rule show`, state (passed as part of a tracked connection) or default.", []string{"bridge", "rule", "action"}, nil)
	c.filterBytes = prometheus.NewDesc("trestle_filter_bytes_total", "Bytes of the frames the bridge's filter decided, by rule as trestle_filter_packets_total.", []string{"bridge", "rule", "action"}, nil)
	c.filterUnread = prometheus.NewDesc("trestle_filter_unread_total", "Frames whose transport header the bridge's filter could not read, so that they matched only rules without port or ICMP keys, by reason: fragment (not the first), ext_headers (too many IPv6 extension headers), truncated.", []string{"bridge", "reason"}, nil)
	c.reloads = prometheus.NewDesc("trestle_config_reloads_total", "Reloads of the config (SIGHUP, trestle reload, systemctl reload), by result: applied, or rejected with the running state kept.", []string{"result"}, nil)
	c.events = prometheus.NewDesc("trestle_events_total", "Events logged (and shown by `trestle events`) since the daemon started, by kind.", []string{"event"}, nil)
	c.suppressed = prometheus.NewDesc("trestle_events_suppressed_total", "Events not logged one by one since the daemon started, counted in another line instead (mac_move: moves of a flapping address), by kind.", []string{"event"}, nil)
	c.lost = prometheus.NewDesc("trestle_events_lost_total", "Events the datapath could not hand to the daemon: its event ring was full (the daemon behind, or not running).", nil, nil)
	c.snoopMsgs = prometheus.NewDesc("trestle_snoop_messages_total", "IGMP, MLD and PIM messages the daemon read from a snooping bridge's ports, by kind (report, leave, query, pim, malformed, refused: memberships not taken, a bound reached), and the queries its querier sent (query_sent, a frame out of a port each).", []string{"bridge", "kind"}, nil)
	c.snoopLost = prometheus.NewDesc("trestle_snoop_lost_total", "IGMP, MLD and PIM messages the datapath could not copy to the daemon: its snoop ring was full (they were forwarded all the same).", nil, nil)
	c.neighClaims = prometheus.NewDesc("trestle_neigh_claims_total", "Claims of addresses a neigh_suppress bridge read from its ports' ARP, neighbour discovery, DHCPACKs and DHCPv6 REPLYs, by result: learned (a new entry), moved (an address another station held, taken once that station was gone), malformed (a copy not read), or refused_<why> (spoofed, foreign_mac, address, ip_guard, static, held, port_limit, table_full, dhcp_guard: docs/security.md).", []string{"bridge", "result"}, nil)
	c.neighLearned = prometheus.NewDesc("trestle_neigh_learned_entries", "Learned entries in the bridge's neighbour table (neigh_suppress).", []string{"bridge"}, nil)
	c.build = prometheus.NewDesc("trestle_build_info", "The running trestle's build: always 1.", []string{"version", "goversion"}, nil)
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append(append([]*prometheus.Desc{}, c.port...), c.vlan...) {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{c.drops, c.unattached, c.up, c.entries, c.maxEntries, c.aged, c.filterPackets, c.filterBytes, c.filterUnread, c.reloads, c.build, c.events, c.suppressed, c.lost, c.snoopMsgs, c.snoopLost, c.neighClaims, c.neighLearned} {
		ch <- d
	}
}

func counter(desc *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
}

func gauge(desc *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
}

// scrape is what a scrape needs of the daemon's state, copied under its
// lock; the maps are read after the lock is released, so a scrape never
// holds the daemon (a reload, a control request, the aging sweep) for longer
// than this copy takes. What the datapath keeps of its own in Go (its
// VLANs' counter indexes, its rule sets' counter ids) is copied under the
// lock too: an apply writes those, and Go's maps do not take a reader
// beside a writer (the runtime stops the process: "concurrent map read
// and map write").
type scrape struct {
	applied, rejected  uint64
	logged, suppressed map[string]uint64
	moves              eventsLost
	bridges            []bridgeScrape
	vlanAware          bool
	vlans              []datapath.VLAN // held by the datapath, with their counters' index
	vlansErr           error
}

type eventsLost interface{ EventsLost() (uint64, error) }

type bridgeScrape struct {
	name        string
	id          uint16
	maxEntries  int
	aged        uint64
	filter      bool
	filterIDs   datapath.FilterCounterIDs // the running rule set's counters
	filterOn    bool                      // the filter is in the datapath
	filterErr   error
	ruleActions []string // each rule's action, in order
	defAction   string
	vlans       []uint16
	ports       []portScrape
}

type portScrape struct {
	name, mode string
	up         bool
	slot       uint16
}

func (d *Daemon) scrape() scrape {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := scrape{applied: d.reloads[true], rejected: d.reloads[false]}
	s.logged, s.suppressed = d.events.counts()
	if d.moves != nil {
		s.moves = d.moves
	}
	bs, _ := d.sortedBridges("")
	for _, b := range bs {
		bsc := bridgeScrape{name: b.cfg.Name, id: b.id, maxEntries: b.cfg.MaxEntries, aged: d.aged[b.cfg.Name], filter: b.cfg.Filter, defAction: config.ActionPass}
		if b.cfg.DefaultBlock {
			bsc.defAction = config.ActionBlock
		}
		if b.cfg.Filter {
			bsc.filterIDs, bsc.filterOn, bsc.filterErr = d.counters.FilterCounterIDs(b.id)
		}
		for _, r := range b.rules() {
			a := config.ActionPass
			if r.Block {
				a = config.ActionBlock
			}
			bsc.ruleActions = append(bsc.ruleActions, a)
		}
		if b.cfg.VLANAware() {
			s.vlanAware = true
			bsc.vlans = b.vlans()
		}
		for _, p := range b.ports {
			m := string(p.mode)
			if m == "" {
				m = "none"
			}
			bsc.ports = append(bsc.ports, portScrape{name: p.name(), mode: m, up: p.forwards(), slot: p.slot})
		}
		s.bridges = append(s.bridges, bsc)
	}
	if s.vlanAware {
		s.vlans, s.vlansErr = d.counters.VLANs()
	}
	return s
}

// Collect reads the maps. A map that cannot be read becomes an invalid
// metric, which the handler reports and skips: the rest is still served.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	ch <- gauge(c.build, 1, Build, runtime.Version())
	s := d.scrape()
	ch <- counter(c.reloads, s.applied, "applied")
	ch <- counter(c.reloads, s.rejected, "rejected")
	for _, k := range eventKinds {
		ch <- counter(c.events, s.logged[k], k)
	}
	ch <- counter(c.suppressed, s.suppressed[ctl.EventMACMove], ctl.EventMACMove)
	if s.moves != nil {
		if n, err := s.moves.EventsLost(); err != nil {
			ch <- prometheus.NewInvalidMetric(c.lost, err)
		} else {
			ch <- counter(c.lost, n)
		}
	}
	c.collectSnoop(ch)
	c.collectNeighLearn(ch)
	if st, err := d.counters.Stats(0); err != nil {
		ch <- prometheus.NewInvalidMetric(c.unattached, err)
	} else {
		for i, n := range st.Drops {
			ch <- counter(c.unattached, n, tbpf.DropReason(i).String())
		}
	}
	for _, b := range s.bridges {
		name := b.name
		if n, err := d.counters.BridgeMACs(b.id); err != nil {
			ch <- prometheus.NewInvalidMetric(c.entries, err)
		} else {
			ch <- gauge(c.entries, float64(n), name)
		}
		ch <- gauge(c.maxEntries, float64(b.maxEntries), name)
		ch <- counter(c.aged, b.aged, name)
		for _, p := range b.ports {
			up := 0.0
			if p.up {
				up = 1
			}
			ch <- gauge(c.up, up, name, p.name, p.mode)
			st, err := d.counters.Stats(p.slot)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(c.port[0], fmt.Errorf("bridge %s port %s: %w", name, p.name, err))
				continue
			}
			for i, v := range st.C {
				ch <- counter(c.port[i], v, name, p.name)
			}
			for i, v := range st.Drops {
				ch <- counter(c.drops, v, name, p.name, tbpf.DropReason(i).String())
			}
		}
		c.collectFilter(ch, b)
	}
	if s.vlanAware {
		c.collectVLANs(ch, s)
	}
}

func (c *collector) collectFilter(ch chan<- prometheus.Metric, b bridgeScrape) {
	if !b.filter {
		return
	}
	if b.filterErr != nil {
		ch <- prometheus.NewInvalidMetric(c.filterPackets, fmt.Errorf("bridge %s: %w", b.name, b.filterErr))
		return
	}
	if !b.filterOn {
		return
	}
	counts, err := c.d.counters.ReadFilterCounters(b.filterIDs)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.filterPackets, fmt.Errorf("bridge %s: %w", b.name, err))
		return
	}
	one := func(rule, action string, packets, bytes uint64) {
		ch <- counter(c.filterPackets, packets, b.name, rule, action)
		ch <- counter(c.filterBytes, bytes, b.name, rule, action)
	}
	for i, action := range b.ruleActions {
		if i < len(counts.Rules) {
			one(strconv.Itoa(i+1), action, counts.Rules[i].Packets, counts.Rules[i].Bytes)
		}
	}
	one("state", config.ActionPass, counts.State.Packets, counts.State.Bytes)
	one("default", b.defAction, counts.Default.Packets, counts.Default.Bytes)
	u, err := c.d.counters.FilterUnread(b.id)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.filterUnread, fmt.Errorf("bridge %s: %w", b.name, err))
		return
	}
	ch <- counter(c.filterUnread, u.Fragment, b.name, "fragment")
	ch <- counter(c.filterUnread, u.ExtHeaders, b.name, "ext_headers")
	ch <- counter(c.filterUnread, u.Truncated, b.name, "truncated")
}

func (c *collector) collectVLANs(ch chan<- prometheus.Metric, s scrape) {
	if s.vlansErr != nil {
		ch <- prometheus.NewInvalidMetric(c.vlan[0], s.vlansErr)
		return
	}
	index := map[[2]uint16]uint16{}
	for _, v := range s.vlans {
		index[[2]uint16{v.Bridge, v.VID}] = v.Index
	}
	for _, b := range s.bridges {
		for _, vid := range b.vlans {
			var vs tbpf.VLANStats
			if idx, ok := index[[2]uint16{b.id, vid}]; ok {
				var err error
				if vs, err = c.d.counters.VLANStats(idx); err != nil {
					ch <- prometheus.NewInvalidMetric(c.vlan[0], fmt.Errorf("bridge %s VLAN %d: %w", b.name, vid, err))
					continue
				}
			}
			for i, v := range vs.C {
				ch <- counter(c.vlan[i], v, b.name, strconv.Itoa(int(vid)))
			}
		}
	}
}

// metricsServer is the running endpoint: where it listens (addr) and
// where it was asked to (want, as the file or --metrics says it).
type metricsServer struct {
	addr, want string
	srv        *http.Server
}

// registry holds trestle's collector and the Go runtime's and process's
// (the daemon's own memory and CPU).
func (d *Daemon) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(d), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// The endpoint's limits: a scrape client, or anyone who can reach the
// address, holds at most a connection's worth of the daemon for at most
// these times, and no more than metricsConns connections (a new one
// takes the place of the one idle longest: connLimit) and
// metricsScrapes scrapes at once (a scrape beyond is answered 503 at once).
// Variables, so that a test need not wait out the timeouts.
var (
	metricsReadTimeout  = 10 * time.Second
	metricsWriteTimeout = 30 * time.Second
	metricsIdleTimeout  = 60 * time.Second
	metricsConns        = 32
	metricsScrapes      = 4
)

// metricsListenAddr is addr with the loopback address when it names no
// host (":9470"): the endpoint has no authentication, so every interface
// is only ever what an operator asks for by name ("0.0.0.0:9470", "[::]:9470").
func metricsListenAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// serveMetrics listens on addr and serves /metrics until stopped.
func (d *Daemon) serveMetrics(addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", metricsListenAddr(addr))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.registry(), promhttp.HandlerOpts{
		ErrorLog:            slogPrinter{d},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: metricsScrapes,
		Timeout:             metricsWriteTimeout - time.Second,
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "trestle: metrics at /metrics")
	})
	lim := newConnLimit(ln, metricsConns)
	m := &metricsServer{addr: ln.Addr().String(), want: addr, srv: &http.Server{
		ConnState:         lim.track,
		Handler:           mux,
		ReadHeaderTimeout: metricsReadTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}}
	go func() {
		if err := m.srv.Serve(lim); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics endpoint stopped", "addr", m.addr, "err", err)
		}
	}()
	d.log.Info("metrics endpoint", "addr", m.addr, "path", "/metrics")
	return m, nil
}

func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.srv.Shutdown(ctx)
}

// slogPrinter passes promhttp's errors (a map that could not be read) to
// the daemon's log.
type slogPrinter struct{ d *Daemon }

func (p slogPrinter) Println(v ...any) { p.d.log.Warn("metrics", "err", fmt.Sprint(v...)) }
