package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frrconf"
	"github.com/trestle/trestle/internal/lab/sink"
	"github.com/trestle/trestle/internal/netnsutil"
)

// Sites is the multi-host topology of an EVPN overlay, which the lab's
// overlay kind and the overlay's end-to-end tests (tests/overlay) both
// build: N sites, each a namespace with a switch (the DUT: trestle, or the
// Linux bridge with a vxlan device, which its user sets up), its VTEP on
// the loopback and FRR (zebra, then bgpd, each site a BGP neighbour of
// every other), and its stations behind it. The sites are joined by a
// routed underlay: two by one veth, more by a veth each to a namespace of
// their own ("ul") whose Linux bridge joins them in one subnet. Site n
// (1-based) has VTEP 10.255.0.n and underlay address 192.0.2.n/24 on ul0,
// and a route to every other site's VTEP through its underlay address.
//
// Its namespaces and processes are the Net's (Net.Close removes them);
// Close stops FRR and removes FRR's files, which the Net does not.
type Sites struct {
	Net   *Net
	Sites []*Site
	// Underlay is the underlay's namespace with more than two sites (its
	// bridge "ul", a port uN for site N); nil with two.
	Underlay *NS
	// dir holds each site's FRR directory: not under a run's or a test's
	// directory, which only root may enter, as FRR's daemons run as frr.
	dir string
}

// Site is one site of Sites: its switch's namespace, addresses, FRR and
// stations.
type Site struct {
	N     int // 1-based
	NS    *NS
	VTEP  string // 10.255.0.N, on lo
	Under string // 192.0.2.N, on ul0
	ASN   uint32
	// FRR is FRR's directory: configs, pid files, sockets (vtysh's
	// --vty_socket).
	FRR         string
	Zebra, BGPd *Proc // while FRR runs
	// Peers are the other sites: BGP neighbours and VTEPs.
	Peers []*Site
	// Stations are the site's hosts, each plugged into the switch at its
	// Port.
	Stations []*Host
}

// FRR's daemons, as Debian's frr package installs them.
const (
	FRRZebra = "/usr/lib/frr/zebra"
	FRRBGPd  = "/usr/lib/frr/bgpd"
)

// SitesASN is every site's AS over iBGP; over eBGP site N's is
// SitesASN+N.
const SitesASN = 65000

// SitesOpts shape Sites.
type SitesOpts struct {
	Sites    int // at least 2
	Stations int // per site
	// Station is station i (1-based) of site n: its port on the site's
	// switch, its MAC and its address with prefix length. nil: station h
	// of all (site n's station i is h = (n-1)*Stations+i) has port pH,
	// HostMAC(h) and HostIP(h)/16, as the lab's other topologies number
	// their hosts.
	Station func(n, i int) (port string, mac net.HardwareAddr, cidr string)
	// UnderlayMTU is the MTU of the underlay's links (0: the kernel's,
	// 1500): a VXLAN over IPv4 adds 50 bytes to the overlay's frames.
	UnderlayMTU int
	// UnderlayGRO turns GRO on at both ends of each site's underlay veth (ul0),
	// as a NIC has it: a veth then takes XDP redirects (ndo_xdp_xmit), as
	// a NIC's driver does, which trestle's XDP encapsulation needs.
	UnderlayGRO bool
	// StationGRO turns GRO on at the switch's end of each station's veth:
	// a veth delivers a generator's XDP frames only into a peer with GRO
	// or an XDP program (architecture.md rule 10).
	StationGRO bool
	// EBGP gives each site an AS of its own (SitesASN+N); else one AS,
	// iBGP in a full mesh.
	EBGP bool
}

// NewSites builds the sites of o in nt: their namespaces ("a", "b", ...;
// stations "h1", "h2", ...), the underlay and the stations, and FRR's
// directories; it starts neither the switches nor FRR (StartFRR), whose
// order is the user's. It returns Sites for Close even with an error.
func NewSites(ctx context.Context, nt *Net, o SitesOpts) (*Sites, error) {
	ss := &Sites{Net: nt}
	if o.Sites < 2 || o.Sites > 26 {
		return ss, fmt.Errorf("sites: %d sites, need 2..26", o.Sites)
	}
	for n := 1; n <= o.Sites; n++ {
		ns, err := nt.NS(string(rune('a' + n - 1)))
		if err != nil {
			return ss, err
		}
		s := &Site{N: n, NS: ns, VTEP: fmt.Sprintf("10.255.0.%d", n), Under: fmt.Sprintf("192.0.2.%d", n), ASN: SitesASN}
		if o.EBGP {
			s.ASN += uint32(n)
		}
		ss.Sites = append(ss.Sites, s)
	}
	for _, s := range ss.Sites {
		for _, p := range ss.Sites {
			if p != s {
				s.Peers = append(s.Peers, p)
			}
		}
	}
	if err := ss.underlay(ctx, o); err != nil {
		return ss, err
	}
	if err := ss.stations(o); err != nil {
		return ss, err
	}
	return ss, ss.frrDirs(ctx)
}

// underlay joins the sites and gives each its addresses and routes.
func (ss *Sites) underlay(ctx context.Context, o SitesOpts) error {
	nt := ss.Net
	mtu := func(ns *NS, dev string) error {
		if o.UnderlayMTU == 0 {
			return nil
		}
		_, err := ns.Run(ctx, "ip", "link", "set", "dev", dev, "mtu", fmt.Sprint(o.UnderlayMTU))
		return err
	}
	if len(ss.Sites) == 2 {
		if err := nt.Veth(ss.Sites[0].NS, "ul0", ss.Sites[1].NS, "ul0", VethOpts{}); err != nil {
			return err
		}
	} else {
		core, err := nt.NS("ul")
		if err != nil {
			return err
		}
		ss.Underlay = core
		if _, err := core.Run(ctx, "ip", "link", "add", "ul", "type", "bridge"); err != nil {
			return err
		}
		if err := mtu(core, "ul"); err != nil {
			return err
		}
		for _, s := range ss.Sites {
			port := fmt.Sprintf("u%d", s.N)
			if err := nt.Veth(s.NS, "ul0", core, port, VethOpts{}); err != nil {
				return err
			}
			if err := mtu(core, port); err != nil {
				return err
			}
			if _, err := core.Run(ctx, "ip", "link", "set", "dev", port, "master", "ul"); err != nil {
				return err
			}
			// A site's XDP redirect into its ul0 is delivered when the
			// veth's other end, here, takes it (GRO on).
			if o.UnderlayGRO {
				if err := core.Features(port, map[string]bool{"rx-gro": true}); err != nil {
					return err
				}
			}
		}
		if err := core.LinkUp("ul"); err != nil {
			return err
		}
	}
	for _, s := range ss.Sites {
		if o.UnderlayGRO {
			if err := s.NS.Features("ul0", map[string]bool{"rx-gro": true}); err != nil {
				return err
			}
		}
		if err := mtu(s.NS, "ul0"); err != nil {
			return err
		}
		cmds := [][]string{
			{"addr", "add", s.Under + "/24", "dev", "ul0"},
			{"addr", "add", s.VTEP + "/32", "dev", "lo"},
		}
		for _, p := range s.Peers {
			cmds = append(cmds, []string{"route", "add", p.VTEP + "/32", "via", p.Under})
		}
		for _, args := range cmds {
			if _, err := s.NS.Run(ctx, "ip", args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// stations plugs each site's stations into its switch.
func (ss *Sites) stations(o SitesOpts) error {
	for _, s := range ss.Sites {
		for i := 1; i <= o.Stations; i++ {
			h := (s.N-1)*o.Stations + i
			port, mac, cidr := fmt.Sprintf("p%d", h), HostMAC(h), HostIP(h)+"/16"
			if o.Station != nil {
				port, mac, cidr = o.Station(s.N, i)
			}
			ns, err := ss.Net.NS(fmt.Sprintf("h%d", h))
			if err != nil {
				return err
			}
			ip, _, _ := strings.Cut(cidr, "/")
			st := &Host{NS: ns, If: "eth0", MAC: mac, IP: ip, Port: port}
			if err := netnsutil.Attach(&s.NS.NS, netnsutil.Host{NS: &ns.NS, If: st.If, MAC: mac, CIDR: cidr, Port: port}, 1); err != nil {
				return err
			}
			if o.StationGRO {
				if err := s.NS.Features(port, map[string]bool{"rx-gro": true}); err != nil {
					return err
				}
			}
			s.Stations = append(s.Stations, st)
		}
	}
	return nil
}

// frrDirs makes each site's FRR directory, FRR's own (its daemons drop to
// frr:frr).
func (ss *Sites) frrDirs(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "trestle-frr-")
	if err != nil {
		return err
	}
	ss.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for _, s := range ss.Sites {
		s.FRR = filepath.Join(dir, s.Name())
		if err := os.Mkdir(s.FRR, 0o755); err != nil {
			return err
		}
	}
	if out, err := exec.CommandContext(ctx, "chown", "-R", "frr:frr", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown %s to frr: %v: %s", dir, err, out)
	}
	return nil
}

// Topo is the sites' stations as a topology of the lab (for a Rig): its
// hosts, site by site.
func (ss *Sites) Topo() *Topo {
	t := &Topo{Net: ss.Net}
	for _, s := range ss.Sites {
		t.Hosts = append(t.Hosts, s.Stations...)
	}
	t.Shape = Shape{Hosts: len(t.Hosts), Chain: 1}
	return t
}

// Close stops every site's FRR and removes FRR's files. How a daemon
// ended is not its error: one that died is the test's or the
// measurement's to report (StopFRR says). It may be called on the Sites
// of a failed NewSites, and twice.
func (ss *Sites) Close() error {
	if ss == nil {
		return nil
	}
	for i := len(ss.Sites) - 1; i >= 0; i-- {
		_ = ss.Sites[i].StopFRR()
	}
	var err error
	if ss.dir != "" {
		err = os.RemoveAll(ss.dir)
		ss.dir = ""
	}
	return err
}

// Name is the site's letter: A for site 1, B, ...
func (s *Site) Name() string { return string(rune('A' + s.N - 1)) }

// Settings describe the site's underlay and FRR, for a record: each key
// prefixed with "host NAME ".
func (s *Site) Settings(underlayMTU int) map[string]string {
	var peers []string
	for _, p := range s.Peers {
		peers = append(peers, p.Under)
	}
	bgp := "iBGP"
	if s.ASN != SitesASN {
		bgp = "eBGP"
	}
	pre := "host " + s.Name() + " "
	return map[string]string{
		pre + "VTEP": fmt.Sprintf("%s on lo, underlay %s/24 on ul0 (MTU %d)", s.VTEP, s.Under, underlayMTU),
		pre + "FRR":  fmt.Sprintf("zebra then bgpd, %s AS %d with %s, advertise-all-vni, graceful-restart with preserve-fw-state, timers 3 9, connect 1, advertisement-interval 0", bgp, s.ASN, strings.Join(peers, ", ")),
	}
}

// StartFRR starts the site's zebra, then its bgpd once zebra's socket is
// there, with frrconf's configuration (every other site a neighbour,
// timers that bring a session up in seconds). StopFRR or the Net's Close
// stops them, by PID.
func (s *Site) StartFRR(ctx context.Context) error {
	site := frrconf.Site{Name: s.Name(), ASN: s.ASN, RouterID: s.VTEP}
	for _, p := range s.Peers {
		site.Peers = append(site.Peers, frrconf.Peer{Addr: p.Under, ASN: p.ASN})
	}
	zconf := filepath.Join(s.FRR, "zebra.conf")
	bconf := filepath.Join(s.FRR, "bgpd.conf")
	if err := os.WriteFile(zconf, []byte(frrconf.Zebra(site)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(bconf, []byte(frrconf.BGPd(site)), 0o644); err != nil {
		return err
	}
	// A socket an earlier zebra left would pass for the new one's.
	zsock := frrconf.ZebraSocket(s.FRR)
	if err := os.Remove(zsock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	common := frrconf.Args(s.FRR)
	var err error
	if s.Zebra, err = s.NS.Start(FRRZebra, append([]string{"-f", zconf, "-i", filepath.Join(s.FRR, "zebra.pid")}, common...)...); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(zsock); err == nil {
			break
		}
		select {
		case <-s.Zebra.Done():
			return fmt.Errorf("zebra on host %s exited: %v\n%s", s.Name(), s.Zebra.Err(), s.Zebra.Output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zebra on host %s: no socket %s after 10s\n%s", s.Name(), zsock, s.Zebra.Output())
		}
	}
	return s.startBGPd()
}

// StopBGPd stops the site's bgpd alone (SIGTERM, then SIGKILL, by PID):
// zebra stays, and withdraws what bgpd gave it. StartBGPd starts it again.
func (s *Site) StopBGPd() error {
	if s.BGPd == nil {
		return nil
	}
	err := s.BGPd.Stop()
	s.BGPd = nil
	if err != nil && !strings.Contains(err.Error(), "terminated") {
		return fmt.Errorf("host %s: bgpd: %w", s.Name(), err)
	}
	return nil
}

// StartBGPd starts the site's bgpd again after StopBGPd, with the
// configuration StartFRR wrote.
func (s *Site) StartBGPd() error { return s.startBGPd() }

// startBGPd starts the site's bgpd with the configuration StartFRR wrote.
func (s *Site) startBGPd() error {
	var err error
	s.BGPd, err = s.NS.Start(FRRBGPd, append([]string{"-f", filepath.Join(s.FRR, "bgpd.conf"), "-i", filepath.Join(s.FRR, "bgpd.pid")}, frrconf.Args(s.FRR)...)...)
	return err
}

// StopFRR stops the site's bgpd, then its zebra, by their PIDs (SIGTERM,
// then SIGKILL), and says how each ended if not by the signal.
func (s *Site) StopFRR() error {
	var errs []error
	for _, p := range []*Proc{s.BGPd, s.Zebra} {
		if p == nil {
			continue
		}
		if err := p.Stop(); err != nil && !strings.Contains(err.Error(), "terminated") {
			errs = append(errs, fmt.Errorf("host %s: %s: %w", s.Name(), p.Name, err))
		}
	}
	s.BGPd, s.Zebra = nil, nil
	return errors.Join(errs...)
}

// RestartFRR is an FRR restart for a restart's stream: bgpd and zebra
// stopped, then started again; back once every BGP session of the site is
// up again (WaitSessions), so that the stream's tail covers the routes
// exchanged again.
func (s *Site) RestartFRR(ctx context.Context) (Restarted, error) {
	t0 := time.Now()
	_ = s.StopFRR()
	res := Restarted{Exited: time.Since(t0), From: "FRR (zebra, bgpd)", To: "FRR (zebra, bgpd)"}
	err := s.StartFRR(ctx)
	if err == nil {
		err = s.WaitSessions(ctx, 30*time.Second)
	}
	res.Back = time.Since(t0)
	return res, err
}

// WaitSessions waits until bgpd has every peer of the site Established,
// for at most limit.
func (s *Site) WaitSessions(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := ""
	for {
		out, err := s.Vtysh(ctx, "show bgp summary json")
		if err == nil && establishedAll(out, len(s.Peers)) {
			return nil
		}
		last = out
		if time.Now().After(deadline) {
			return fmt.Errorf("host %s: BGP sessions not all up after %v: %v\n%s", s.Name(), limit, err, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// establishedAll says whether FRR's `show bgp summary json` has n peers,
// each Established, in every address family that has peers (at least
// one).
func establishedAll(out string, n int) bool {
	var afs map[string]struct {
		Peers map[string]struct {
			State string `json:"state"`
		} `json:"peers"`
	}
	if json.Unmarshal([]byte(out), &afs) != nil {
		return false
	}
	some := false
	for _, af := range afs {
		if len(af.Peers) == 0 {
			continue
		}
		some = true
		if len(af.Peers) != n {
			return false
		}
		for _, p := range af.Peers {
			if p.State != "Established" {
				return false
			}
		}
	}
	return some
}

// Vtysh runs an FRR command (a show) against the site's daemons.
func (s *Site) Vtysh(ctx context.Context, cmd string) (string, error) {
	return s.NS.Run(ctx, "vtysh", "--vty_socket", s.FRR, "-c", cmd)
}

// Rig is a Rig on the sites' stations (Topo) whose DUT d is already up on
// the sites (each site's switch; d's Setup is not called): the generator,
// sinks, searches and iperf3 of the lab's other topologies, host i being
// the i-th station of all.
func (ss *Sites) Rig(d DUT, place Placement, env *Env) *Rig {
	return &Rig{T: ss.Topo(), DUT: d, Place: place, Env: env, sinks: map[int]*sink.Sink{}}
}

// Announce sends a station's first frame from mac out of h's interface: a
// broadcast with the lab's learning ethertype, which a switch learns mac
// from (and, with EVPN, advertises) and the stations' stacks drop.
func (h *Host) Announce(mac net.HardwareAddr) error { return sendFrame(h, learningFrame(mac)) }

// LinuxVNI is a VNI of a site whose switch is the Linux bridge, set up as
// EVPN with FRR wants it (docs/overlay.md, "A mixed fabric"): a bridge of
// its own (not VLAN-aware, STP off) with the VNI's vxlan device and the
// site's ports of the VNI. The vxlan device sends from the site's VTEP to
// the IANA port and learns nothing from the frames it decapsulates
// (nolearning), and the bridge learns nothing on it (learning off): zebra
// writes the remote MACs and the flood list from the EVPN routes.
type LinuxVNI struct {
	VNI           uint32
	Bridge, VXLAN string
	// MTU is the vxlan device's (0: the kernel's).
	MTU   int
	Ports []string
}

// Commands are the commands that make v with VTEP vtep, in order: the
// bridge and the vxlan device, the device in the bridge, the ports, then
// both up.
func (v LinuxVNI) Commands(vtep string) [][]string {
	cmds := [][]string{
		{"ip", "link", "add", v.Bridge, "type", "bridge", "stp_state", "0"},
		{"ip", "link", "add", v.VXLAN, "type", "vxlan", "id", fmt.Sprint(v.VNI), "local", vtep, "dstport", "4789", "nolearning"},
	}
	join := []string{"ip", "link", "set", "dev", v.VXLAN}
	if v.MTU > 0 {
		join = append(join, "mtu", fmt.Sprint(v.MTU))
	}
	cmds = append(cmds, append(join, "master", v.Bridge), []string{"bridge", "link", "set", "dev", v.VXLAN, "learning", "off"})
	for _, p := range v.Ports {
		cmds = append(cmds, []string{"ip", "link", "set", "dev", p, "master", v.Bridge})
	}
	return append(cmds, []string{"ip", "link", "set", "dev", v.VXLAN, "up"}, []string{"ip", "link", "set", "dev", v.Bridge, "up"})
}

// SetupLinuxVNI makes VNI v on site s, whose switch is the Linux bridge:
// bridge-nf-call off (the bridge forwards without iptables, as trestle
// does), then v's Commands with the site's VTEP.
func (s *Site) SetupLinuxVNI(ctx context.Context, v LinuxVNI) error {
	if err := s.NS.BridgeNetfilter(false); err != nil {
		return err
	}
	for _, args := range v.Commands(s.VTEP) {
		if _, err := s.NS.Run(ctx, args[0], args[1:]...); err != nil {
			return fmt.Errorf("linux-bridge on host %s, VNI %d: %w", s.Name(), v.VNI, err)
		}
	}
	return nil
}

// SiteTrestle is trestle's daemon as a site's switch (StartTrestle), with
// persist: its restart is measured, and Teardown's `trestle down` removes
// its VNIs and its pinned datapath.
type SiteTrestle struct{ d *trestleDUT }

// StartTrestle runs trestle of spec v (its build, its ports' mode) as
// site s's switch, through nsenter (persist pins its datapath in the
// lab's mount namespace), with the configuration config(mode, socket)
// gives. It returns once every port is up, or with skip (the daemon's
// reason) when an overlay port stays down beside a host port that is up:
// the DUT cannot run the overlay. It returns the daemon for Teardown once
// it was made, whatever the error.
func (s *Site) StartTrestle(ctx context.Context, v Spec, env *Env, config func(mode, sock string) string) (t *SiteTrestle, skip string, err error) {
	d, err := v.newDUT()
	if err != nil {
		return nil, "", err
	}
	td, ok := d.(*trestleDUT)
	if !ok {
		return nil, "", fmt.Errorf("site %s: %s is not a trestle DUT", s.Name(), v.Text)
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		return nil, "", fmt.Errorf("trestle with persist runs in the host's namespace through nsenter: %w (it is in util-linux)", err)
	}
	td.env, td.ns, td.persist = env, s.NS, true
	td.sock = filepath.Join(env.WorkDir, s.NS.Name+".sock")
	td.cfg = filepath.Join(env.WorkDir, s.NS.Name+".toml")
	if err := os.WriteFile(td.cfg, []byte(config(td.mode, td.sock)), 0o644); err != nil {
		return nil, "", err
	}
	td.own = env.Trestle
	if td.bin != "" {
		td.own = td.bin
	}
	t = &SiteTrestle{td}
	p, err := td.start(td.own)
	if err != nil {
		return t, "", err
	}
	// Every port attached, or the overlay port down with its reason: the
	// host port up and every port settled.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var st ctl.Status
		err := ctl.Call(td.sock, ctl.Request{Cmd: ctl.CmdShow}, &st)
		if err == nil {
			if allUp(st) {
				td.pinDir = st.PinDir
				// Each port's mode as attached, and why (the default
				// mode's choice is the daemon's).
				td.set = map[string]string{}
				for _, b := range st.Bridges {
					for _, port := range b.Ports {
						td.set["port "+port.Name] = fmt.Sprintf("%s: %s", port.Mode, port.Reason)
					}
				}
				return t, "", nil
			}
			for _, b := range st.Bridges {
				for _, port := range b.Ports {
					if port.Overlay != nil && port.State == "down" && port.Reason != "" && hostPortUp(b) {
						td.pinDir = st.PinDir
						return t, fmt.Sprintf("the overlay port %s stays down beside %s host ports: %s", port.Name, td.mode, port.Reason), nil
					}
				}
			}
		}
		select {
		case <-p.Done():
			return t, "", fmt.Errorf("trestle run on host %s exited: %v\n%s", s.Name(), p.Err(), p.Output())
		case <-ctx.Done():
			return t, "", ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return t, "", fmt.Errorf("trestle run on host %s: ports not up after 15s (%v)\n%s", s.Name(), err, p.Output())
		}
	}
}

func hostPortUp(b ctl.BridgeStatus) bool {
	for _, p := range b.Ports {
		if p.Overlay == nil && p.State == "up" {
			return true
		}
	}
	return false
}

// Sock is the daemon's control socket.
func (t *SiteTrestle) Sock() string { return t.d.sock }

// Mode is the mode of its host ports (the spec's; "" the daemon's choice).
func (t *SiteTrestle) Mode() string { return t.d.mode }

// Label is its build for people: its path and the version it reports.
func (t *SiteTrestle) Label() string { return t.d.label(t.d.own) }

// Settings are its ports' modes as attached, and why.
func (t *SiteTrestle) Settings() map[string]string { return t.d.set }

// Restart restarts the daemon by an event of the restart kind's
// (EventSIGTERM, ...).
func (t *SiteTrestle) Restart(ctx context.Context, kind string) (Restarted, error) {
	return t.d.Restart(ctx, kind)
}

// Reconfigure gives the daemon the configuration config(mode, socket)
// gives and reloads it; it returns once the daemon applied it.
func (t *SiteTrestle) Reconfigure(config func(mode, sock string) string) error {
	if err := os.WriteFile(t.d.cfg, []byte(config(t.d.mode, t.d.sock)), 0o644); err != nil {
		return err
	}
	return ctl.Call(t.d.sock, ctl.Request{Cmd: ctl.CmdReload}, nil)
}

// RSS is the daemon's resident memory (VmRSS), KiB.
func (t *SiteTrestle) RSS() (uint64, error) {
	kib, _, err := DaemonRSS(t.d)
	return kib, err
}

// Teardown stops the daemon and takes its datapath and VNIs down.
func (t *SiteTrestle) Teardown(ctx context.Context) error { return t.d.Teardown(ctx) }
