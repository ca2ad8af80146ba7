// Package overlay is the lab's overlay kind (lab.TestOverlay): two hosts
// joined by a VXLAN overlay with EVPN by FRR (docs/overlay.md), built with
// the core's Sites. Each host is a namespace with the DUT and FRR (zebra,
// then bgpd; iBGP over a routed veth underlay); h1 is behind host A, h2
// behind host B. It measures 64-byte throughput h1 -> h2 through the
// overlay (NDR and PDR), broadcast to three remote VTEPs, a new station's
// type-2 convergence (its first frame on A to its entry on B) and a
// move's flip on the old host, the frames a stream loses while A's
// trestle daemon restarts (persist) and while A's FRR restarts, and
// iperf3 TCP. The kind builds this topology itself, apart from the
// unit's.
package overlay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
)

// It runs after pod-churn, last of the kinds the core kept; tcp's kind
// runs after it.
func init() { lab.Register(Kind{}, lab.TestPodChurn) }

const (
	overlayVNI = 1000
	// overlayMTU is the overlay's MTU on both DUTs: the hosts' 1500, on
	// an underlay of 1550 (VXLAN over IPv4 adds 50 bytes).
	overlayMTU  = 1500
	underlayMTU = overlayMTU + 50
	// overlayConvergeLimit is how long a station's entry may take to
	// appear on the other host before its sample counts as a timeout.
	overlayConvergeLimit = 5 * time.Second
	// overlayPoll is how often a table is read while a sample waits:
	// trestle's is a dump through its socket, which the daemon that is
	// being timed serves, so not more often than this.
	overlayPoll = 5 * time.Millisecond
	// overlayJitter is the most a station waits before its first frame,
	// a random share of it.
	overlayJitter = 200 * time.Millisecond
)

// OverlayStationsDefault is how many new stations a unit times.
const OverlayStationsDefault = 10

// Kind is the overlay kind: Stations is how many new stations a
// unit times (a type-2 convergence and a move each; 0: the default),
// Streams iperf3 TCP's parallel streams (nil: none run).
type Kind struct {
	Stations int
	Streams  []int
	// NoBroadcast leaves the broadcast to three remote VTEPs out (its
	// four hosts' set-up is the longest part of a unit).
	NoBroadcast bool
	// Scale is how many stations the scale measure brings up at once
	// (0: OverlayScaleDefault; below 0: no scale measure).
	Scale int
}

func (k Kind) scale() int {
	if k.Scale == 0 {
		return OverlayScaleDefault
	}
	return max(k.Scale, 0)
}

// The measures of an overlay result (OverlayRecord.Measure), each its
// Param.
const (
	OverlayThroughput = "throughput"      // 64-byte NDR (Value) and PDR, h1 -> h2
	OverlayTCP        = "tcp"             // iperf3 TCP, Streams streams, bit/s
	OverlayConverge   = "convergence"     // a new station's first frame on A to its entry on B, ms
	OverlayMove       = "move"            // a station moved from A to B: its frame on B to A's entry on the overlay, ms
	OverlayRestart    = "trestle-restart" // frames lost while A's daemon restarts
	OverlayFRR        = "frr-restart"     // frames lost while A's zebra and bgpd restart
	OverlayBroadcast  = "broadcast"       // 64-byte NDR of broadcast from h1, due at the hosts of 3 remote VTEPs
	OverlayNeigh      = "neigh"           // h1's ARP requests for h2 (known from a MAC+IP route) on A's underlay, suppression off and on
	OverlayScale      = "scale"           // MACs new stations at once on A: ms until A has them local and B remote, and what memory they took
	OverlaySkipped    = "skipped"         // the DUT cannot run the scenario: Skipped says why
)

// OverlayScaleDefault is how many stations the scale measure brings up
// at once behind A.
const OverlayScaleDefault = 10000

// overlayScaleLimit is how long the scale's stations may take to be
// remote on B.
const overlayScaleLimit = 120 * time.Second

// OverlayRecord is an overlay result's record (Result.Record).
type OverlayRecord struct {
	Measure string  `json:"measure"`
	NDR     float64 `json:"ndr_pps,omitempty"`
	PDR     float64 `json:"pdr_pps,omitempty"`
	Streams int     `json:"streams,omitempty"`
	// Sinks is how many hosts (each behind a remote VTEP) counted a
	// broadcast.
	Sinks int     `json:"sinks,omitempty"`
	Bps   float64 `json:"bits_per_second,omitempty"`
	// SamplesMs are the stations' times, in order; Timeouts the stations
	// whose entry did not appear within overlayConvergeLimit.
	SamplesMs []float64 `json:"samples_ms,omitempty"`
	Timeouts  int       `json:"timeouts,omitempty"`
	// ZebraMs (trestle): each station's time until the far host's kernel
	// bridge had zebra's entry for it, which the daemon then reads into
	// its table (SamplesMs).
	ZebraMs []float64 `json:"zebra_ms,omitempty"`
	// Event is a restart's stream; Rate the stream's rate.
	Event   *lab.RestartEvent `json:"event,omitempty"`
	Rate    float64           `json:"rate_pps,omitempty"`
	Skipped string            `json:"skipped,omitempty"`
	// The scale measure: MACs stations sent a frame each from h1 at
	// once; LocalMs until A's table had them all on h1's port, RemoteMs
	// until B's had them all on the overlay; MemoryKiB the resident
	// memory each process grew by ("B trestle", "A zebra", ...: B's
	// taken when they were all remote, A's at the same time).
	// The neighbour measure: Requests ARP requests from h1 for h2 each
	// way; Crossed how many left A on its underlay, Answered how many
	// replies reached h1, with suppression off and on (neigh.go).
	Requests    int `json:"requests,omitempty"`
	CrossedOff  int `json:"crossed_off,omitempty"`
	CrossedOn   int `json:"crossed_on,omitempty"`
	AnsweredOff int `json:"answered_off,omitempty"`
	AnsweredOn  int `json:"answered_on,omitempty"`
	// The same of neighbour solicitations for h2's IPv6 address.
	NSCrossedOff  int              `json:"ns_crossed_off,omitempty"`
	NSCrossedOn   int              `json:"ns_crossed_on,omitempty"`
	NSAnsweredOff int              `json:"ns_answered_off,omitempty"`
	NSAnsweredOn  int              `json:"ns_answered_on,omitempty"`
	MACs          int              `json:"macs,omitempty"`
	LocalMs       float64          `json:"local_ms,omitempty"`
	RemoteMs      float64          `json:"remote_ms,omitempty"`
	MemoryKiB     map[string]int64 `json:"memory_kib,omitempty"`
	// Settings (the throughput's record) describe the overlay's DUTs and
	// FRR on each host as measured: the unit's own settings are those of
	// its star topology, which the overlay does not use.
	Settings map[string]string `json:"settings,omitempty"`
}

func (Kind) Name() string { return lab.TestOverlay }

// Needs: it builds its own topology after the unit's generator and sinks
// stopped (the Stack phase), on a learning bridge.
func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.Stack, Learning: true} }

func (k Kind) stations() int {
	if k.Stations <= 0 {
		return OverlayStationsDefault
	}
	return k.Stations
}

func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	// Set-up and BGP (about 10 s), a search, two restart streams (about
	// 5 s and 10 s), the stations, the iperf3 runs; the broadcast's four
	// hosts (about 15 s) and its search.
	d := 25*time.Second + 4*lab.TrialTime(tm) + tm.Search.Confirm + time.Duration(k.stations())*600*time.Millisecond +
		time.Duration(len(k.Streams))*(lab.IperfRunTime(s)+time.Second)
	if !k.NoBroadcast {
		d += 15*time.Second + 3*lab.TrialTime(tm) + tm.Search.Confirm
	}
	if n := k.scale(); n > 0 {
		d += time.Duration(n) * time.Millisecond // about 5 s for 10,000 here
	}
	return d
}

func (k Kind) Describe(lab.Scenario) string {
	b := fmt.Sprintf("; then broadcast from h1 to %d remote VTEPs (%d hosts)", overlayBroadcastSites-1, overlayBroadcastSites)
	if k.NoBroadcast {
		b = ""
	}
	sc := ""
	if n := k.scale(); n > 0 {
		sc = fmt.Sprintf("; %d stations at once behind A, timed until B has them all", n)
	}
	return fmt.Sprintf("Overlay:  two hosts (a namespace each: the DUT, FRR's zebra and bgpd, iBGP over a routed veth underlay), VNI %d, h1 behind A, h2 behind B; %d new stations timed%s%s", overlayVNI, k.stations(), sc, b)
}

func (k Kind) TestsLine(lab.Scenario) string {
	if len(k.Streams) == 0 {
		return ""
	}
	return "; iperf3 TCP streams " + strings.Trim(fmt.Sprint(k.Streams), "[]") + " through the overlay"
}

func (Kind) Preset() lab.Scenario { return overlayPreset }

var overlayPreset = lab.Scenario{
	Name: "overlay", Title: "Overlay: VXLAN between two hosts, EVPN by FRR",
	About: "two hosts, each a namespace with the DUT and FRR (zebra and bgpd, iBGP over a routed veth underlay), h1 behind host A, h2 behind host B, one VNI: " +
		"64-byte throughput h1 -> h2 through the overlay (NDR, PDR), broadcast to three remote VTEPs (four hosts), iperf3 TCP with 1 and 4 streams, a new station's type-2 convergence (its first frame on A to its entry on B), " +
		"a move's flip on the old host, frames lost across a trestle restart (persist) and across an FRR restart, ARP requests and neighbour solicitations for h2 on the underlay with suppression off and on, 10000 stations at once behind A until B has them all and the memory they cost; the Linux bridge with a vxlan device (nolearning) and FRR is the reference, trestle in xdp and default mode; " +
		"goals: trestle at least 1.3x the Linux bridge at 64 bytes in its faster mode and no worse in TCP, type-2 convergence median at most 100 ms, 0 frames lost across a trestle restart, no ARP or ND request for a known station across the underlay with suppression on",
	DUTs:  lab.MustSpecs("linux-bridge", "trestle:xdp", "trestle"),
	Hosts: 2, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{Kind{Streams: []int{1, 4}}}, Reps: 3, Load: 0.5, Timing: lab.DefaultTiming,
}

func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	for _, d := range s.DUTs {
		switch {
		case d.Kind != "trestle" && d.Kind != "linux-bridge":
			return nil, fmt.Errorf("overlay: %s: the scenario runs trestle and the Linux bridge (with a vxlan device), not %s", d.Text, d.Kind)
		case d.Mode == "nft" || d.VLAN || d.Mirror || d.Capture || d.Filter != nil || d.Patch || d.Veth:
			return nil, fmt.Errorf("overlay: %s: the overlay's topology has no VLANs, mirrors, filters or chains: only bin= and offloads are taken", d.Text)
		}
	}
	for _, bin := range []string{lab.FRRZebra, lab.FRRBGPd} {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("overlay: FRR's %s is not installed (Debian package frr; scripts/deps.sh installs it): %w", filepath.Base(bin), err)
		}
	}
	if s.Load <= 0 || s.Load > 1 {
		return nil, fmt.Errorf("overlay: the restart streams' load %v: a fraction of the NDR above 0, up to 1", s.Load)
	}
	return []string{fmt.Sprintf("overlay: a topology of its own per unit: hosts A and B (the DUT and FRR 'zebra then bgpd', iBGP over a veth underlay of MTU %d with GRO on at both ends, as a NIC takes XDP redirects, VTEPs on the loopbacks, overlay MTU %d), h1 behind A, h2 behind B; "+
		"the restart streams at %.0f%% of the DUT's NDR, the FRR restart's until it has reached h2 without a gap for %v after A's BGP session is up again; trestle runs with persist, its ports in the DUT's mode (a DUT whose overlay port stays down is listed with the daemon's reason, not run)", underlayMTU, overlayMTU, 100*s.Load, frrTail)}, nil
}

// Flags: --stations, the stations timed a unit (a scenario without an
// overlay test refuses it), and --streams, tcp.Kind's flag, the overlay's
// iperf3 streams.
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{
		{Name: "streams", Type: lab.FlagInts, Lo: 1, Hi: 128, Usage: "iperf3 TCP stream counts, comma-separated",
			Set: lab.Sets(func(k Kind, n []int) (Kind, error) { k.Streams = n; return k, nil })},
		{Name: "stations", Type: lab.FlagInt, Lo: 1, Hi: 1000, For: "the overlay scenario",
			Usage: fmt.Sprintf("overlay: new stations timed a unit, each a type-2 convergence and a move (default %d)", OverlayStationsDefault),
			Set:   lab.Sets(func(k Kind, n int) (Kind, error) { k.Stations = n; return k, nil })},
		{Name: "scale", Type: lab.FlagInt, Lo: 0, Hi: 60000, For: "the overlay scenario",
			Usage: fmt.Sprintf("overlay: stations brought up at once behind host A, timed until host B has\nthem all, with the memory they cost (default %d; 0: none)", OverlayScaleDefault),
			Set: lab.Sets(func(k Kind, n int) (Kind, error) {
				k.Scale = n
				if n == 0 {
					k.Scale = -1
				}
				return k, nil
			})},
	}
}

func (Kind) Section(run *lab.Run) (terminal, md string) {
	rows := overlayRows(run)
	terminal, md = overlaySection(rows)
	return terminal, md + overlaySettings(rows)
}

// SectionIn is the overlay's section of report.md with its chart, written
// into dir.
func (Kind) SectionIn(dir string, run *lab.Run) (string, error) {
	rows := overlayRows(run)
	_, md := overlaySection(rows)
	if md == "" {
		return "", nil
	}
	charts, err := overlayCharts(dir, rows)
	var b bytes.Buffer
	b.WriteString(md)
	lab.EmbedCharts(&b, charts)
	b.WriteString(overlaySettings(rows))
	return b.String(), err
}

// overlaySite is one host of the overlay (a site of Sites) with its DUT.
type overlaySite struct {
	*lab.Site
	port         string           // the host's port: p1 on A, p2 on B
	trestle      *lab.SiteTrestle // nil: the Linux bridge
	vxlan, bridg string           // the Linux bridge's devices
	// The neighbour measure's settings of trestle's config (neigh.go):
	// suppress, the bridge's neigh_suppress; bind, the host whose
	// addresses its port is bound to (nil: none).
	suppress bool
	bind     *lab.Host
}

// overlayRig is the overlay's topology with its DUT and FRR up.
type overlayRig struct {
	sites []*overlaySite
	a, b  *overlaySite // sites[0], sites[1]
	all   *lab.Sites
	rig   *lab.Rig
}

// overlayPair is the rig's DUT: the two sites' DUTs as one.
type overlayPair struct {
	o    *overlayRig
	name string
	set  map[string]string
}

func (p *overlayPair) Name() string                                     { return p.name }
func (p *overlayPair) Learns() bool                                     { return true }
func (p *overlayPair) Setup(context.Context, *lab.Topo, *lab.Env) error { return nil }
func (p *overlayPair) Settings() map[string]string                      { return p.set }

// Teardown stops each site's FRR and takes its trestle down (persist: its
// VNIs and pinned datapath go with `trestle down`).
func (p *overlayPair) Teardown(ctx context.Context) error {
	var errs []error
	for i := len(p.o.sites) - 1; i >= 0; i-- {
		s := p.o.sites[i]
		_ = s.StopFRR()
		if s.trestle != nil {
			errs = append(errs, s.trestle.Teardown(ctx))
		}
	}
	return errors.Join(errs...)
}

// buildOverlay makes the overlay's n sites in nt (Sites): host hI plugged
// into site I at pI; the underlay of MTU underlayMTU, with GRO on the
// ends of a two-site underlay's veth, as a NIC has it: it then takes XDP
// redirects, which trestle's XDP encapsulation needs (docs/overlay.md);
// every DUT runs on the same underlay.
func buildOverlay(ctx context.Context, nt *lab.Net, n int) (*overlayRig, error) {
	all, err := lab.NewSites(ctx, nt, lab.SitesOpts{Sites: n, Stations: 1, UnderlayMTU: underlayMTU, UnderlayGRO: n == 2, StationGRO: true})
	o := &overlayRig{all: all}
	if err != nil {
		return o, err
	}
	for _, s := range all.Sites {
		o.sites = append(o.sites, &overlaySite{Site: s, port: s.Stations[0].Port})
	}
	o.a, o.b = o.sites[0], o.sites[1]
	return o, nil
}

// setupDUT builds the DUT of v on site s: the Linux bridge with a vxlan
// device, or a trestle daemon with an overlay port. A trestle whose
// overlay port does not come up returns the daemon's reason as skip.
func (s *overlaySite) setupDUT(ctx context.Context, v lab.Spec, env *lab.Env) (skip string, err error) {
	if v.Kind == "linux-bridge" {
		s.bridg, s.vxlan = "br0", fmt.Sprintf("vxlan%d", overlayVNI)
		if err := s.SetupLinuxVNI(ctx, lab.LinuxVNI{VNI: overlayVNI, Bridge: s.bridg, VXLAN: s.vxlan, MTU: overlayMTU, Ports: []string{s.port}}); err != nil {
			return "", err
		}
		// IPv6 on the bridge before zebra is given the IPv6 MAC+IP
		// routes of the neighbour measure (neigh.go): it installs their
		// neighbours there, and does not try again one the kernel
		// refused.
		return "", s.NS.Sysctl("net/ipv6/conf/"+s.bridg+"/disable_ipv6", "0")
	}
	// The kernel objects trestle makes for the VNI (docs/overlay.md),
	// where zebra writes the remote entries.
	s.bridg, s.vxlan = fmt.Sprintf("tbr%d", overlayVNI), fmt.Sprintf("tvx%d", overlayVNI)
	s.trestle, skip, err = s.StartTrestle(ctx, v, env, s.trestleConfig)
	return skip, err
}

// trestleConfig is site s's trestle config: its host's port in mode and
// the overlay port of the VNI, with persist (the restart is measured).
func (s *overlaySite) trestleConfig(mode, sock string) string {
	suppress, bind := "", ""
	if s.suppress {
		suppress = "neigh_suppress = true\n"
	}
	if h := s.bind; h != nil {
		bind = fmt.Sprintf("locked = true\nallowed_macs = [%q]\nip_guard = true\nallowed_ips = [%q, %q]\n", h.MAC, h.IP, hostIP6(h))
	}
	return fmt.Sprintf(`[daemon]
socket = %q
vtep = %q
frr_vty_dir = %q
persist = true

[[bridge]]
name = "br0"
%s
[[bridge.port]]
interface = %q
mode = %q
%s
[[bridge.port]]
vxlan = %d
mtu = %d
`, sock, s.VTEP, s.FRR, suppress, s.port, mode, bind, overlayVNI, overlayMTU)
}

// neighs are site s's bridge FDB entries (the Linux bridge's), read in
// its namespace.
func (s *overlaySite) neighs() ([]netlink.Neigh, map[string]int, error) {
	var out []netlink.Neigh
	idx := map[string]int{}
	err := s.NS.Do(func() error {
		for _, n := range []string{s.bridg, s.vxlan, s.port} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			idx[n] = l.Attrs().Index
		}
		var err error
		out, err = netlink.NeighList(0, unix.AF_BRIDGE)
		return err
	})
	return out, idx, err
}

// floods says whether site s's VNI floods to every other site's VTEP:
// their type-3 routes arrived.
func (s *overlaySite) floods() (bool, error) {
	if s.trestle != nil {
		var st ctl.Status
		if err := ctl.Call(s.trestle.Sock(), ctl.Request{Cmd: ctl.CmdShow}, &st); err != nil {
			return false, err
		}
		for _, b := range st.Bridges {
			for _, p := range b.Ports {
				if p.Overlay != nil {
					return s.floodsTo(p.Overlay.FloodList), nil
				}
			}
		}
		return false, nil
	}
	ns, idx, err := s.neighs()
	if err != nil {
		return false, err
	}
	var list []string
	for _, n := range ns {
		if n.LinkIndex == idx[s.vxlan] && n.IP != nil && n.HardwareAddr.String() == "00:00:00:00:00:00" {
			list = append(list, n.IP.String())
		}
	}
	return s.floodsTo(list), nil
}

// floodsTo says whether a flood list holds every other site's VTEP.
func (s *overlaySite) floodsTo(list []string) bool {
	for _, p := range s.Peers {
		if !slices.Contains(list, p.VTEP) {
			return false
		}
	}
	return true
}

// where says where site s's table has mac: "local" (on the host's
// port), "remote" (on the overlay), or "" (not there).
func (s *overlaySite) where(mac net.HardwareAddr) (string, error) {
	if s.trestle == nil {
		return s.kernelWhere(mac)
	}
	es, err := ctl.FDB(s.trestle.Sock(), "br0")
	if err != nil {
		return "", err
	}
	for _, e := range es {
		if e.MAC != mac.String() {
			continue
		}
		switch {
		case e.VTEP != "":
			return "remote", nil
		case e.Port == s.port:
			return "local", nil
		}
	}
	return "", nil
}

// kernelWhere is where the kernel bridge of site s has mac: the Linux
// bridge's, or trestle's tbrVNI, whose entries zebra writes ("local" only
// on the Linux bridge: trestle's local addresses are on its advertise
// port).
func (s *overlaySite) kernelWhere(mac net.HardwareAddr) (string, error) {
	ns, idx, err := s.neighs()
	if err != nil {
		return "", err
	}
	for _, n := range ns {
		// The bridge's own entries (master): where it forwards.
		if n.MasterIndex != idx[s.bridg] || n.HardwareAddr.String() != mac.String() {
			continue
		}
		switch n.LinkIndex {
		case idx[s.vxlan]:
			return "remote", nil
		case idx[s.port]:
			return "local", nil
		}
	}
	return "", nil
}

// waitWhere polls site s until mac is at want, and says how long from t0
// (ok false: not within limit). For trestle, zebra is how long until its
// kernel bridge had the entry at want (what zebra wrote, which the daemon
// then reads into its table; 0: not seen before the table had it).
func (s *overlaySite) waitWhere(ctx context.Context, mac net.HardwareAddr, want string, t0 time.Time, limit time.Duration) (d, zebra time.Duration, ok bool, err error) {
	for {
		if s.trestle != nil && zebra == 0 {
			at, err := s.kernelWhere(mac)
			if err != nil {
				return 0, 0, false, err
			}
			if at == want {
				zebra = time.Since(t0)
			}
		}
		at, err := s.where(mac)
		if err != nil {
			return 0, 0, false, err
		}
		if at == want {
			return time.Since(t0), zebra, true, nil
		}
		if time.Since(t0) > limit {
			return 0, 0, false, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, false, ctx.Err()
		case <-time.After(overlayPoll):
		}
	}
}

// waitFor polls f every 50 ms until it holds, for at most limit.
func waitFor(ctx context.Context, limit time.Duration, what string, f func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := f()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (last: %v)", what, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) (err error) {
	v, err := lab.ParseSpec(u.Base.DUT)
	if err != nil {
		return err
	}
	fail := func(measure string, err error) {
		r := u.Base
		r.Test, r.Param, r.Error = lab.TestOverlay, measure, err.Error()
		_ = r.SetRecord(OverlayRecord{Measure: measure})
		u.Add(r)
	}
	err = k.run(ctx, u, v)
	if err == nil && !k.NoBroadcast {
		err = k.broadcast(ctx, u, v)
	}
	if err != nil && !errors.Is(err, errSkipped) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fail("setup", err)
	}
	return ctx.Err()
}

// errSkipped: the DUT cannot run the overlay, and its result says why.
var errSkipped = errors.New("overlay: not run")

// overlayBroadcastSites is the broadcast's topology: host A and the three
// remote VTEPs its floods go to.
const overlayBroadcastSites = 4

// broadcast measures broadcast from h1 (behind A) through the overlay to
// three remote VTEPs, each with a host: the kernel's vxlan device
// replicates each flood to every VTEP of its flood list (head-end
// replication), for trestle and the Linux bridge alike.
func (k Kind) broadcast(ctx context.Context, u *lab.UnitRun, v lab.Spec) (err error) {
	u.Status(fmt.Sprintf("overlay: %d hosts for the broadcast, %s and FRR on each", overlayBroadcastSites, v.Text))
	nt := lab.NewNet("ob")
	defer func() {
		if cerr := nt.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	o, skip, err := upOverlay(ctx, u, v, nt, overlayBroadcastSites)
	defer func() {
		if cerr := o.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err == nil && skip != "" {
		err = errors.New(skip)
	}
	rec := OverlayRecord{Measure: OverlayBroadcast, Sinks: overlayBroadcastSites - 1}
	if err != nil {
		k.add(u, u.Base, rec, err)
		return nil
	}
	var sinks []int
	for i := 1; i < overlayBroadcastSites; i++ {
		sinks = append(sinks, i)
	}
	if err := o.rig.StartPackets(ctx, sinks); err != nil {
		return err
	}
	defer o.rig.StopPackets()
	mix, err := lab.FrameSize("64").Mix()
	if err != nil {
		return err
	}
	tm := u.S.Timing.NDROnly()
	trial := 0
	spec := lab.TrialSpec{From: 0, To: sinks, Mix: mix, DstMAC: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	sr, trials, err := o.rig.SearchTrials(ctx, spec, tm, func(st lab.SearchTrial) {
		trial++
		u.Status(fmt.Sprintf("overlay %s, broadcast to %d VTEPs, trial %d: %s offered, loss %.3f%%", v.Text, len(sinks), trial, lab.PPSText(st.Offered), 100*st.Loss))
	})
	rec.NDR = sr.Throughput
	k.add(u, lab.ResultOfSearch(u.Base, lab.TestOverlay, OverlayBroadcast, sr, trials), rec, err)
	return nil
}

// add records one measure of the unit.
func (Kind) add(u *lab.UnitRun, r lab.Result, rec OverlayRecord, err error) {
	r.Test, r.Param = lab.TestOverlay, rec.Measure
	if rec.Streams > 0 {
		r.Param = fmt.Sprintf("%s streams=%d", rec.Measure, rec.Streams)
	}
	if err != nil {
		r.Error = err.Error()
	}
	if serr := r.SetRecord(rec); serr != nil && r.Error == "" {
		r.Error = serr.Error()
	}
	u.Add(r)
}

// upOverlay builds an overlay of n sites for v in nt, with the DUT and FRR
// up on every site and each site's flood list holding every other VTEP.
// A DUT that cannot run it is skip, with why. o.close removes what nt's
// Close does not (the DUTs, FRR, FRR's directory), whatever the error.
func upOverlay(ctx context.Context, u *lab.UnitRun, v lab.Spec, nt *lab.Net, n int) (o *overlayRig, skip string, err error) {
	o, err = buildOverlay(ctx, nt, n)
	if err != nil {
		return o, "", err
	}
	env := *u.Rig.Env
	pair := &overlayPair{o: o, name: v.Text, set: map[string]string{}}
	o.rig = o.all.Rig(pair, u.Rig.Place, &env)
	if v.Kind == "trestle" {
		if _, err := lab.EnsureBPFFS(); err != nil {
			return o, "", err
		}
	}
	// Host A: the DUT, then FRR; the others: FRR, then the DUT (the
	// order does not matter, docs/overlay.md; both are run).
	for i, s := range o.sites {
		if i > 0 {
			if err := s.StartFRR(ctx); err != nil {
				return o, "", err
			}
		}
		skip, err := s.setupDUT(ctx, v, &env)
		if err != nil || skip != "" {
			return o, skip, err
		}
		if i == 0 {
			if err := s.StartFRR(ctx); err != nil {
				return o, "", err
			}
		}
	}
	for _, s := range o.sites {
		if err := waitFor(ctx, 60*time.Second, fmt.Sprintf("host %s: the type-3 routes of the other hosts (flood list)", s.Name()), s.floods); err != nil {
			return o, "", err
		}
		for key, val := range s.settings() {
			pair.set[key] = val
		}
	}
	return o, "", nil
}

// close takes the overlay's DUTs and FRR down and removes FRR's
// directory.
func (o *overlayRig) close() error {
	var err error
	if o.rig != nil {
		err = o.rig.Close(context.Background())
	}
	return errors.Join(err, o.all.Close())
}

// run builds the overlay for v, measures it and removes it.
func (k Kind) run(ctx context.Context, u *lab.UnitRun, v lab.Spec) (err error) {
	u.Status("overlay: hosts A and B, the underlay, h1 and h2, " + v.Text + " and FRR")
	nt := lab.NewNet("ov")
	defer func() {
		if cerr := nt.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	o, skip, err := upOverlay(ctx, u, v, nt, 2)
	defer func() {
		if cerr := o.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err != nil {
		return err
	}
	if skip != "" {
		k.add(u, u.Base, OverlayRecord{Measure: OverlaySkipped, Skipped: skip}, nil)
		u.Notef(fmt.Sprintf("overlay: %s not run: %s", v.Text, skip))
		return errSkipped
	}
	t := o.rig.T
	h1, h2 := t.Hosts[0], t.Hosts[1]
	if err := waitFor(ctx, 20*time.Second, "ping h1 -> h2 through the overlay", func() (bool, error) {
		_, err := h1.NS.Run(ctx, "ping", "-c", "1", "-W", "1", h2.IP)
		return err == nil, err
	}); err != nil {
		return err
	}
	for _, c := range []struct {
		s   *overlaySite
		mac net.HardwareAddr
	}{{o.a, h2.MAC}, {o.b, h1.MAC}} {
		if err := waitFor(ctx, 10*time.Second, fmt.Sprintf("host %s: %s remote", c.s.Name(), c.mac), func() (bool, error) {
			at, err := c.s.where(c.mac)
			return at == "remote", err
		}); err != nil {
			return err
		}
	}

	// Packets: the throughput, then the trestle restart's stream.
	rig := o.rig
	if err := rig.StartPackets(ctx, []int{1}); err != nil {
		return err
	}
	tm := u.S.Timing
	trial := 0
	sr, trials, err := rig.Throughput(ctx, "64", tm, 1, func(st lab.SearchTrial) {
		trial++
		u.Status(fmt.Sprintf("overlay %s, 64-byte throughput, trial %d: %s offered, loss %.3f%%", v.Text, trial, lab.PPSText(st.Offered), 100*st.Loss))
	})
	r := lab.ResultOfSearch(u.Base, lab.TestOverlay, OverlayThroughput, sr, trials)
	k.add(u, r, OverlayRecord{Measure: OverlayThroughput, NDR: sr.Throughput, PDR: sr.PDR, Settings: o.rig.DUT.Settings()}, err)
	if err != nil {
		return err
	}
	mix, err := lab.FrameSize("64").Mix()
	if err != nil {
		return err
	}
	rate := u.S.Load * sr.Throughput
	stream := func(measure string, tail time.Duration, event func(context.Context) (lab.Restarted, error)) {
		if rate <= 0 {
			k.add(u, u.Base, OverlayRecord{Measure: measure}, errors.New("no zero-loss rate found: no stream to run"))
			return
		}
		u.Status(fmt.Sprintf("overlay %s: a stream at %s through %s", v.Text, lab.PPSText(rate), measure))
		ev, err := rig.RestartWindow(ctx, mix, rate, 1, time.Second, tail, tm, event)
		r := u.Base
		r.Unit, r.Value = "frames", float64(max(ev.Lost, 0))
		k.add(u, r, OverlayRecord{Measure: measure, Event: &ev, Rate: rate}, err)
	}
	if a := o.a.trestle; a != nil {
		stream(OverlayRestart, time.Second, func(ctx context.Context) (lab.Restarted, error) { return a.Restart(ctx, lab.EventSIGTERM) })
	}
	rig.StopPackets()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	conv, moves, convErr := k.timeStations(ctx, u, o, h1, h2)
	for _, rec := range []OverlayRecord{conv, moves} {
		r := u.Base
		r.Unit = "ms"
		if len(rec.SamplesMs) > 0 {
			r.Value = lab.Median(rec.SamplesMs)
		}
		err := convErr
		if err == nil && len(rec.SamplesMs) == 0 {
			err = fmt.Errorf("no station's entry within %v", overlayConvergeLimit)
		}
		k.add(u, r, rec, err)
	}

	for _, n := range k.Streams {
		u.Status(fmt.Sprintf("overlay %s: iperf3 TCP, %d stream(s)", v.Text, n))
		ir, err := rig.Iperf(ctx, 0, 1, "tcp", n, lab.IperfRunTime(u.S), "")
		r := u.Base
		r.Unit, r.Value, r.Iperf, r.CPU = "bit/s", ir.BitsPerSec, &ir, ir.CPU
		k.add(u, r, OverlayRecord{Measure: OverlayTCP, Streams: n, Bps: ir.BitsPerSec}, err)
	}

	// Last, as it takes the session down: FRR restarted on A under a
	// stream.
	if err := rig.StartPackets(ctx, []int{1}); err != nil {
		return err
	}
	// FRR is back once its BGP sessions are up; the stream goes on
	// through what follows: the routes exchanged again, and what the DUT
	// does then (trestle ends its hold of stale entries 2s after zebra
	// last wrote one).
	stream(OverlayFRR, frrTail, o.a.RestartFRR)
	rig.StopPackets()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Then ARP and ND suppression, which rebinds B's port and turns it
	// on at A.
	u.Status(fmt.Sprintf("overlay %s: %d ARP requests and %[2]d neighbour solicitations for h2, suppression off and on", v.Text, OverlayNeighRequests))
	nr, err := neighSuppression(ctx, o, h1, h2, OverlayNeighRequests)
	r = u.Base
	r.Unit, r.Value = "frames", float64(nr.CrossedOn+nr.NSCrossedOn)
	k.add(u, r, nr, err)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Last of all, as it leaves the tables full: the scale.
	if n := k.scale(); n > 0 {
		u.Status(fmt.Sprintf("overlay %s: %d stations at once behind A", v.Text, n))
		rec, err := scaleStations(ctx, o, h1, n, u.Base.Rep)
		r := u.Base
		r.Unit, r.Value = "ms", rec.RemoteMs
		k.add(u, r, rec, err)
	}
	return ctx.Err()
}

// scaleStations sends a frame from each of n new stations behind A (from
// h1, at once) and times until A's table has them all on h1's port and
// B's has them all on the overlay: learned, advertised, and taken in at
// the far end. The memory each process grew by is taken when B has them
// all (trestle's daemons, zebra and bgpd on both hosts).
func scaleStations(ctx context.Context, o *overlayRig, h *lab.Host, n, rep int) (OverlayRecord, error) {
	rec := OverlayRecord{Measure: OverlayScale, MACs: n, MemoryKiB: map[string]int64{}}
	base := net.HardwareAddr{2, 0x0a, byte(rep), 0, 0, 1}
	procs := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, s := range o.sites[:2] {
			if s.trestle != nil {
				if kib, err := s.trestle.RSS(); err == nil {
					m[s.Name()+" trestle"] = kib
				}
			}
			for _, p := range []*lab.Proc{s.Zebra, s.BGPd} {
				if p != nil && p.Cmd != nil && p.Cmd.Process != nil {
					if kib, err := lab.ReadRSS(p.Cmd.Process.Pid); err == nil {
						m[s.Name()+" "+filepath.Base(p.Name)] = kib
					}
				}
			}
		}
		return m
	}
	before := procs()
	frames := lab.LearningFrames(base, n)
	t0 := time.Now()
	if err := lab.SendFrames(h, frames); err != nil {
		return rec, err
	}
	local, remote := false, false
	for !remote {
		if !local {
			c, err := o.a.count(base, "local")
			if err != nil {
				return rec, err
			}
			if local = c >= n; local {
				rec.LocalMs = lab.Millis(time.Since(t0))
			}
		}
		c, err := o.b.count(base, "remote")
		if err != nil {
			return rec, err
		}
		if remote = c >= n; remote {
			rec.RemoteMs = lab.Millis(time.Since(t0))
			break
		}
		if time.Since(t0) > overlayScaleLimit {
			return rec, fmt.Errorf("host B has %d of the %d stations on the overlay after %v", c, n, overlayScaleLimit)
		}
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	after := procs()
	for name, kib := range after {
		if b, ok := before[name]; ok {
			rec.MemoryKiB[name] = int64(kib) - int64(b)
		}
	}
	return rec, nil
}

// count is how many addresses with base's first three bytes site s's
// table has at want ("local": on the host's port; "remote": on the
// overlay).
func (s *overlaySite) count(base net.HardwareAddr, want string) (int, error) {
	prefix := base[:3].String()
	n := 0
	if s.trestle != nil {
		es, err := ctl.FDB(s.trestle.Sock(), "br0")
		if err != nil {
			return 0, err
		}
		for _, e := range es {
			if strings.HasPrefix(e.MAC, prefix) && (want == "remote" && e.VTEP != "" || want == "local" && e.VTEP == "" && e.Port == s.port) {
				n++
			}
		}
		return n, nil
	}
	ns, idx, err := s.neighs()
	if err != nil {
		return 0, err
	}
	dev := map[string]int{"remote": idx[s.vxlan], "local": idx[s.port]}[want]
	for _, e := range ns {
		if e.MasterIndex == idx[s.bridg] && e.LinkIndex == dev && strings.HasPrefix(e.HardwareAddr.String(), prefix) {
			n++
		}
	}
	return n, nil
}

// frrTail is how long the FRR restart's stream must go on without a gap
// after FRR's BGP sessions are up again.
const frrTail = 5 * time.Second

// timeStations times the unit's new stations: each one's first frame on
// A (from h1) to its entry in B's table, remote (conv); then the same
// station's frame on B (from h2) to A's entry on the overlay (moves).
func (k Kind) timeStations(ctx context.Context, u *lab.UnitRun, o *overlayRig, h1, h2 *lab.Host) (conv, moves OverlayRecord, err error) {
	conv.Measure, moves.Measure = OverlayConverge, OverlayMove
	// sample times one frame of mac from h to its entry at s, into rec.
	sample := func(rec *OverlayRecord, h *lab.Host, s *overlaySite, mac net.HardwareAddr) (bool, error) {
		// A station comes at a random time, never in step with the
		// daemons' timers (trestle's 100 ms sync; FRR's own).
		lab.SleepCtx(ctx, rand.N(overlayJitter))
		d, zebra, ok, err := stationTime(ctx, h, s, mac, "remote")
		if ok {
			rec.SamplesMs = append(rec.SamplesMs, lab.Millis(d))
			if zebra > 0 {
				rec.ZebraMs = append(rec.ZebraMs, lab.Millis(zebra))
			}
		} else if err == nil {
			rec.Timeouts++
		}
		return ok, err
	}
	for i := range k.stations() {
		u.Status(fmt.Sprintf("overlay %s: station %d of %d", u.Base.DUT, i+1, k.stations()))
		mac := net.HardwareAddr{2, 0, 0x0e, byte(u.Base.Rep), byte((i + 1) >> 8), byte(i + 1)}
		ok, err := sample(&conv, h1, o.b, mac)
		if err != nil {
			return conv, moves, err
		}
		// The station must be local on A (which advertised it) before
		// it moves.
		if ok && waitFor(ctx, 2*time.Second, "station local on host A", func() (bool, error) {
			at, err := o.a.where(mac)
			return at == "local", err
		}) != nil {
			ok = false
			moves.Timeouts++
		}
		if !ok {
			continue
		}
		if _, err := sample(&moves, h2, o.a, mac); err != nil {
			return conv, moves, err
		}
	}
	return conv, moves, ctx.Err()
}

// stationTime sends a station's first frame from host h (a broadcast from
// mac) and times it until site s has mac at want.
func stationTime(ctx context.Context, h *lab.Host, s *overlaySite, mac net.HardwareAddr, want string) (d, zebra time.Duration, ok bool, err error) {
	t0 := time.Now()
	if err := h.Announce(mac); err != nil {
		return 0, 0, false, err
	}
	return s.waitWhere(ctx, mac, want, t0, overlayConvergeLimit)
}

// settings describe site s's DUT and FRR as measured.
func (s *overlaySite) settings() map[string]string {
	pre := "host " + s.Name() + " "
	set := s.Site.Settings(underlayMTU)
	set[pre+"host MTU"] = fmt.Sprint(overlayMTU)
	if s.trestle != nil {
		set[pre+"trestle"] = fmt.Sprintf("%s; persist", s.trestle.Label())
		set[pre+"config"] = s.trestleConfig(s.trestle.Mode(), s.trestle.Sock())
		for k, v := range s.trestle.Settings() {
			set[pre+k] = v
		}
	} else {
		set[pre+"linux-bridge"] = fmt.Sprintf("%s (not VLAN-aware, bridge-nf-call off) with %s: id %d local %s dstport 4789 nolearning, mtu %d, port learning off; %s", s.bridg, s.vxlan, overlayVNI, s.VTEP, overlayMTU, s.port)
	}
	return set
}
