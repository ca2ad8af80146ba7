package lab

// What a DUT takes that some kinds ask of it, as capabilities rather than
// its name or its fields: how many ports one of its bridges takes
// (PortTaker, the port-scale kind), and the CNI plugin its pods join with
// (PodPlugin, the pod-churn kind).

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PortTaker is a DUT with a limit on the ports of one bridge.
type PortTaker interface {
	// TakesPorts says whether the DUT takes n ports in one bridge: "" if
	// it does, else why not.
	TakesPorts(ctx context.Context, env *Env, n int) (refused string, err error)
}

// linuxBridgeMaxPorts is what the kernel's bridge takes: BR_MAX_PORTS
// (net/bridge/br_private.h) is 1024, but port number 0 is never given out
// (br_if.c, find_portno), so the 1024th port is refused (ENOSPC,
// "Exchange full", as seen on 6.18).
const linuxBridgeMaxPorts = 1<<10 - 1

// TakesPorts: the Linux bridge's limit is the kernel's.
func (b *linuxBridge) TakesPorts(_ context.Context, _ *Env, n int) (string, error) {
	if n > linuxBridgeMaxPorts {
		return fmt.Sprintf("the Linux bridge takes at most %d ports (BR_MAX_PORTS 1024, of which port number 0 is never used)", linuxBridgeMaxPorts), nil
	}
	return "", nil
}

// TakesPorts: trestle is asked itself, `trestle check` of the config the
// DUT would run with n ports (the lab does not read the switch's limits
// from its code).
func (d *trestleDUT) TakesPorts(ctx context.Context, env *Env, n int) (string, error) {
	bin := cmp.Or(d.bin, env.Trestle)
	b := Bridge{Name: "br1"}
	for i := 1; i <= n; i++ {
		b.Ports = append(b.Ports, fmt.Sprintf("p%d", i))
	}
	cfg := filepath.Join(env.WorkDir, fmt.Sprintf("port-scale-%d.toml", n))
	text := trestleConfig(&Topo{Bridges: []Bridge{b}}, env, d.mode, filepath.Join(env.WorkDir, "port-scale.sock"))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return "", err
	}
	defer os.Remove(cfg)
	out, err := exec.CommandContext(ctx, bin, "check", cfg).CombinedOutput()
	if err == nil {
		return "", nil
	}
	if _, ok := err.(*exec.ExitError); !ok {
		return "", fmt.Errorf("port-scale: trestle check: %w", err)
	}
	// The check's first complaint, without the file, the line and the
	// key ("trestle: FILE:LINE: bridge[0].port[64]: too many ...").
	why := FirstLine(strings.TrimSpace(string(out)))
	if _, rest, ok := strings.Cut(why, cfg+":"); ok {
		if parts := strings.SplitN(rest, ": ", 3); len(parts) == 3 {
			why = parts[2]
		}
	}
	return "trestle check: " + why, nil
}

// PodPlugin is a DUT whose bridge pods join through a CNI plugin.
type PodPlugin interface {
	// PodPlugin is the plugin's type, the keys its network's config adds
	// (nil: none), and CNI_PATH: where the plugin is, then tools (where
	// cnitool's IPAM plugin, host-local, is).
	PodPlugin(tools string) (typ string, keys map[string]any, path string)
}

// BridgePluginDir is where Debian's containernetworking-plugins puts the
// `bridge` plugin.
const BridgePluginDir = "/usr/lib/cni"

// PodPlugin: trestle's own (bin/cni/trestle, beside the DUT's build),
// with the daemon's socket.
func (d *trestleDUT) PodPlugin(tools string) (string, map[string]any, string) {
	return "trestle", map[string]any{"socket": d.sock}, filepath.Join(filepath.Dir(d.own), "cni") + ":" + tools
}

// PodPlugin: the reference `bridge` plugin.
func (b *linuxBridge) PodPlugin(tools string) (string, map[string]any, string) {
	return "bridge", nil, BridgePluginDir + ":" + tools
}
