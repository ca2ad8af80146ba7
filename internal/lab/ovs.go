package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ovsDUT is Open vSwitch's userspace datapath (datapath_type=netdev): the
// kernel module is not needed, and on this kind of machine it is not there.
// ovsdb-server and ovs-vswitchd run inside the DUT namespace with a database,
// sockets and logs of their own under the run's directory, started by the
// lab (never the system's services). Ports are AF_XDP sockets in native copy
// mode (afxdp) or the plain netdev-linux ports (system). Each bridge forwards
// with the NORMAL action: a learning switch.
type ovsDUT struct {
	name, portType string
	db, vswitchd   *Proc
	dir            string
	set            map[string]string
	t              *Topo
	cpu            string // the DUT's CPU, where its daemons run
	restarts       int
}

func (o *ovsDUT) Name() string { return o.name }

// groForPacketsOnly: the plain ports read frames with a packet socket, and
// a GRO super-frame does not fit, so host TCP stalls with GRO on; there are
// no AF_XDP sockets on the queues, so GRO can change while it runs.
func (o *ovsDUT) groForPacketsOnly() bool     { return o.portType == "system" }
func (o *ovsDUT) Learns() bool                { return true }
func (o *ovsDUT) Settings() map[string]string { return o.set }

// OVSAvailable says why Open vSwitch cannot run here, or nil.
func OVSAvailable() error {
	for _, b := range []string{"ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%w: %s is not installed (Debian package openvswitch-switch; `trestle lab --install` or scripts/lab-deps.sh installs it without starting its services)", ErrUnavailable, b)
		}
	}
	if _, err := os.Stat(ovsSchema); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, ovsSchema, err)
	}
	return nil
}

const ovsSchema = "/usr/share/openvswitch/vswitch.ovsschema"

func (o *ovsDUT) env() []string {
	return []string{"OVS_RUNDIR=" + o.dir, "OVS_DBDIR=" + o.dir, "OVS_LOGDIR=" + o.dir, "OVS_SYSCONFDIR=" + o.dir}
}

func (o *ovsDUT) vsctl(ctx context.Context, t *Topo, args ...string) (string, error) {
	return o.vsctlWait(ctx, t, 10*time.Second, args...)
}

// vsctlWait is vsctl with another time limit (ovs-vsctl's --timeout).
func (o *ovsDUT) vsctlWait(ctx context.Context, t *Topo, limit time.Duration, args ...string) (string, error) {
	return t.DUT.RunEnv(ctx, o.env(), "ovs-vsctl", append([]string{"--db=unix:" + filepath.Join(o.dir, "db.sock"), fmt.Sprintf("--timeout=%d", int(limit.Seconds()))}, args...)...)
}

func (o *ovsDUT) Setup(ctx context.Context, t *Topo, env *Env) error {
	if err := OVSAvailable(); err != nil {
		return err
	}
	o.dir = filepath.Join(env.WorkDir, t.DUT.Name+"-ovs")
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	dbfile := filepath.Join(o.dir, "conf.db")
	if out, err := exec.CommandContext(ctx, "ovsdb-tool", "create", dbfile, ovsSchema).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	cpu := strconv.Itoa(env.DUTCPU)
	var err error
	o.db, err = t.DUT.StartEnv(o.env(), "taskset", "-c", cpu, "ovsdb-server", dbfile,
		"--remote=punix:"+filepath.Join(o.dir, "db.sock"), "--pidfile="+filepath.Join(o.dir, "ovsdb.pid"),
		"--unixctl="+filepath.Join(o.dir, "ovsdb.ctl"), "--log-file="+filepath.Join(o.dir, "ovsdb.log"), "--no-chdir")
	if err != nil {
		return err
	}
	if err := waitFile(ctx, filepath.Join(o.dir, "db.sock"), o.db); err != nil {
		return fmt.Errorf("ovsdb-server: %w", err)
	}
	if _, err := o.vsctl(ctx, t, "--no-wait", "init"); err != nil {
		return err
	}
	o.t, o.cpu = t, cpu
	if err := o.startVswitchd(ctx); err != nil {
		return err
	}
	args := ovsArgs(t, env, o.portType)
	if _, err := o.vsctl(ctx, t, args...); err != nil {
		return fmt.Errorf("configure Open vSwitch: %w\n%s", err, tail(filepath.Join(o.dir, "vswitchd.log"), 10))
	}
	// Ready when every port has an OpenFlow port number, patch ports too.
	ports := t.DUTPorts()
	for _, pp := range t.Patches {
		ports = append(ports, pp.PortA, pp.PortB)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range ports {
		for {
			out, err := o.vsctl(ctx, t, "get", "interface", p, "ofport")
			if n, _ := strconv.Atoi(strings.TrimSpace(out)); err == nil && n > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("Open vSwitch: port %s not ready after 20s (ofport %q)\n%s", p, strings.TrimSpace(out), tail(filepath.Join(o.dir, "vswitchd.log"), 10))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if t.Mirror != nil {
		if _, err := o.vsctl(ctx, t, ovsMirrorArgs(t)...); err != nil {
			return fmt.Errorf("Open vSwitch: make the mirror: %w\n%s", err, tail(filepath.Join(o.dir, "vswitchd.log"), 10))
		}
	}
	// The userspace datapath does not keep a frame's checksum-partial state
	// (neither AF_XDP copy mode nor the plain ports): host TCP needs the
	// hosts to checksum and segment in software.
	for _, h := range t.Hosts {
		off := map[string]bool{"tx-checksum-ip-generic": false, "tx-tcp-segmentation": false, "tx-tcp6-segmentation": false, "tx-generic-segmentation": false}
		if err := h.NS.Features(h.If, off); err != nil {
			return fmt.Errorf("Open vSwitch: turn the hosts' TX offloads off: %w", err)
		}
	}
	ver, _ := exec.Command("ovs-vswitchd", "--version").Output()
	o.set = map[string]string{
		"version":        strings.SplitN(strings.TrimSpace(string(ver)), "\n", 2)[0],
		"datapath":       "netdev (userspace)",
		"ports":          o.portType,
		"pmd-cpu-mask":   fmt.Sprintf("0x%x (CPU %d)", 1<<env.DUTCPU, env.DUTCPU),
		"flows":          "NORMAL (learning switch)",
		"mac-table-size": "default 2048",
		"hosts":          "TX checksum, TSO and GSO off on every host (the userspace datapath needs it for TCP)",
	}
	if o.portType == "afxdp" {
		o.set["ports"] = "afxdp, xdp-mode=native (copy mode on veth)"
		if t.Shape.Queues > 1 {
			o.set["ports"] += fmt.Sprintf(", n_rxq=%d (a socket on each of the veth's queues, all polled by the one PMD thread)", t.Shape.Queues)
		}
	}
	if env.MaxEntries > 0 {
		o.set["mac-table-size"] = strconv.Itoa(env.MaxEntries)
	}
	if j := t.Joins(); len(t.Patches) > 0 {
		o.set["bridges joined by"] = strings.Replace(j, "patch ports", "patch ports (type=patch)", 1)
	} else if j != "" {
		o.set["bridges joined by"] = j + " (AF_XDP or plain ports like the hosts')"
	}
	for _, p := range t.DUTPorts() {
		if pv, ok := t.VLANs[p]; ok {
			o.set["port "+p] = pv.ovsSettings()
		}
	}
	if t.Mirror != nil {
		o.set["mirror"] = "ovs-vsctl " + strings.Join(ovsMirrorArgs(t), " ") + " (the output port gets the mirrored frames and nothing else)"
	}
	if t.Multicast != nil {
		if err := o.setSnooping(ctx, t); err != nil {
			return fmt.Errorf("Open vSwitch: %w", err)
		}
	}
	return nil
}

// ovsMirrorArgs is the ovs-vsctl command that makes t's mirror: a Mirror
// row selecting the mirrored ports' frames as sources (what they receive,
// direction in) and as destinations (what leaves them, out), its output
// port the span port, set on the bridge that holds it.
func ovsMirrorArgs(t *Topo) []string {
	m := t.Mirror
	var args, ids []string
	for i, p := range m.Ports {
		id := fmt.Sprintf("@p%d", i)
		args = append(args, "--", "--id="+id, "get", "port", p)
		ids = append(ids, id)
	}
	args = append(args, "--", "--id=@s", "get", "port", m.To, "--", "--id=@m", "create", "mirror", "name="+m.Name)
	if m.Direction == "in" || m.Direction == "both" {
		args = append(args, "select-src-port="+strings.Join(ids, ","))
	}
	if m.Direction == "out" || m.Direction == "both" {
		args = append(args, "select-dst-port="+strings.Join(ids, ","))
	}
	args = append(args, "output-port=@s")
	for _, br := range t.Bridges {
		if slices.Contains(br.Ports, m.To) {
			args = append(args, "--", "set", "bridge", br.Name, "mirrors=@m")
		}
	}
	return args
}

// ovsArgs is the ovs-vsctl command that builds t's bridges: the userspace
// datapath, ports of portType, the ports' VLANs where t has them, and the
// patch port pairs that join bridges where t has them (each port of a pair
// the other's peer; they stay type=patch whatever portType is).
func ovsArgs(t *Topo, env *Env, portType string) []string {
	args := []string{"set", "Open_vSwitch", ".", fmt.Sprintf("other_config:pmd-cpu-mask=0x%x", 1<<env.DUTCPU)}
	for _, br := range t.Bridges {
		args = append(args, "--", "add-br", br.Name, "--", "set", "bridge", br.Name, "datapath_type=netdev")
		if env.MaxEntries > 0 {
			args = append(args, fmt.Sprintf("other_config:mac-table-size=%d", env.MaxEntries))
		}
		for _, p := range br.Ports {
			args = append(args, "--", "add-port", br.Name, p)
			if pv, ok := t.VLANs[p]; ok {
				args = append(args, strings.Fields(pv.ovsSettings())...)
			}
			if portType == "afxdp" {
				args = append(args, "--", "set", "interface", p, "type=afxdp", "options:xdp-mode=native")
				if t.Shape.Queues > 1 {
					// A socket on every queue: a sender's CPU picks the queue.
					args = append(args, fmt.Sprintf("options:n_rxq=%d", t.Shape.Queues))
				}
			}
		}
	}
	for _, pp := range t.Patches {
		args = append(args,
			"--", "add-port", pp.A, pp.PortA, "--", "set", "interface", pp.PortA, "type=patch", "options:peer="+pp.PortB,
			"--", "add-port", pp.B, pp.PortB, "--", "set", "interface", pp.PortB, "type=patch", "options:peer="+pp.PortA)
	}
	return args
}

// ovsSettings are the Port columns of a port in VLANs (ovs-vsctl's
// add-port takes them after the port's name).
func (p PortVLAN) ovsSettings() string {
	if p.Access != 0 {
		return fmt.Sprintf("vlan_mode=access tag=%d", p.Access)
	}
	return "vlan_mode=trunk trunks=" + joinVIDs(p.Trunk, ",")
}

// startVswitchd starts ovs-vswitchd and waits for its control socket.
func (o *ovsDUT) startVswitchd(ctx context.Context) error {
	p, err := o.t.DUT.StartEnv(o.env(), "taskset", "-c", o.cpu, "ovs-vswitchd", "unix:"+filepath.Join(o.dir, "db.sock"),
		"--pidfile="+filepath.Join(o.dir, "vswitchd.pid"), "--unixctl="+filepath.Join(o.dir, "vswitchd.ctl"),
		"--log-file="+filepath.Join(o.dir, "vswitchd.log"), "--no-chdir")
	if err != nil {
		return err
	}
	o.vswitchd = p
	if err := waitFile(ctx, filepath.Join(o.dir, "vswitchd.ctl"), p); err != nil {
		return fmt.Errorf("ovs-vswitchd: %w", err)
	}
	return nil
}

func (o *ovsDUT) RestartPlan(_ context.Context, kind string) (string, error) {
	switch kind {
	case EventSIGKILL, EventSIGTERM:
		return fmt.Sprintf("ovs-vswitchd stopped with %s, then started again (ovsdb-server and the configuration stay; the userspace datapath and its MAC table are ovs-vswitchd's)", strings.ToUpper(kind)), nil
	case EventUpgrade:
		return "", errors.New("the lab has no other build of Open vSwitch (its SIGTERM events are what an upgrade would be)")
	}
	return "", fmt.Errorf("no such event: %s", kind)
}

func (o *ovsDUT) Restart(ctx context.Context, kind string) (Restarted, error) {
	var res Restarted
	sig := syscall.SIGTERM
	switch kind {
	case EventSIGKILL:
		sig = syscall.SIGKILL
	case EventSIGTERM:
	default:
		return res, fmt.Errorf("Open vSwitch: no %s events", kind)
	}
	old := o.vswitchd
	if old == nil {
		return res, errors.New("ovs-vswitchd: not running")
	}
	res.From, res.To = "ovs-vswitchd", "ovs-vswitchd"
	logFile := filepath.Join(o.dir, "vswitchd.log")
	t0 := time.Now()
	if err := old.Cmd.Process.Signal(sig); err != nil {
		return res, fmt.Errorf("%v to ovs-vswitchd (pid %d): %w", sig, old.Cmd.Process.Pid, err)
	}
	select {
	case <-old.Done():
	case <-time.After(20 * time.Second):
		return res, fmt.Errorf("ovs-vswitchd (pid %d) still running 20s after %v\n%s", old.Cmd.Process.Pid, sig, tail(logFile, 10))
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.Exited = time.Since(t0)
	before := tail(logFile, 12)
	// A killed ovs-vswitchd leaves its control socket and pidfile behind:
	// the new one would seem to be up at once.
	for _, f := range []string{"vswitchd.ctl", "vswitchd.pid"} {
		if err := os.Remove(filepath.Join(o.dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("ovs-vswitchd: remove the old %s: %w", f, err)
		}
	}
	if err := o.startVswitchd(ctx); err != nil {
		return res, err
	}
	// Back once it has applied the database's configuration (bridges,
	// ports, their AF_XDP sockets): ovs-vsctl without --no-wait returns
	// only then.
	o.restarts++
	_, err := o.vsctlWait(ctx, o.t, 30*time.Second, "set", "Open_vSwitch", ".", fmt.Sprintf("external_ids:trestle-lab-restarts=%d", o.restarts))
	res.Back = time.Since(t0)
	res.Log = "before:\n" + before + "\nafter:\n" + tail(logFile, 20)
	if err != nil {
		return res, fmt.Errorf("ovs-vswitchd after %v: the configuration was not applied: %w", sig, err)
	}
	return res, nil
}

func (o *ovsDUT) Teardown(context.Context) error {
	var errs []error
	for _, p := range []*Proc{o.vswitchd, o.db} {
		if p != nil {
			if err := p.StopWith(syscall.SIGTERM, 10*time.Second); err != nil && !strings.Contains(err.Error(), "terminated") {
				errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
			}
		}
	}
	o.vswitchd, o.db = nil, nil
	return errors.Join(errs...)
}

// waitFile waits until path exists or p exits.
func waitFile(ctx context.Context, path string, p *Proc) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited: %v\n%s", p.Err(), p.Output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear in 15s\n%s", path, p.Output())
		}
	}
}

// tail is the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
