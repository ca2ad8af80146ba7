// Package podchurn is the lab's pod-churn kind: CNI ADDs and DELs timed,
// the trestle plugin against the bridge plugin.
package podchurn

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestPortScale) }

// TestPodChurn: pods coming and going on a bridge as a container runtime
// makes them (issue 28's lab): Pods CNI ADDs, one after another, then
// their DELs, each timed, through cnitool in the DUT's namespace with the
// host-local IPAM plugin: the trestle plugin (bin/cni/trestle) on a
// trestle DUT, the `bridge` plugin (Debian's containernetworking-plugins,
// /usr/lib/cni) on the Linux bridge. Each pod is a namespace of the
// unit's, gone with it.
const TestPodChurn = lab.TestPodChurn

// Kind is the pod-churn kind: Pods ADDs then as many DELs.
type Kind struct {
	Pods int
}

// Record is a pod-churn result's record: each ADD's and DEL's
// time, in seconds, in the order they ran.
type Record struct {
	Plugin string    `json:"plugin"`
	Add    []float64 `json:"add"`
	Del    []float64 `json:"del"`
	// Stopped is why the ADDs stopped before the pods asked for, when an
	// ADD failed after others had worked (a bridge that is full): the
	// pods added are then deleted and timed as the others.
	Stopped string `json:"stopped,omitempty"`
}

func (Kind) Name() string { return TestPodChurn }

func (Kind) Preset() lab.Scenario { return podChurnPreset }

// PodChurnDefault is the pods of a churn when --pods does not say (issue
// 28's lab).
const PodChurnDefault = 100

var podChurnPreset = lab.Scenario{
	Name: "pod-churn", Title: "Pod churn: CNI ADDs and DELs, the trestle plugin against the bridge plugin",
	About: "a 2-port bridge, then 100 pods (--pods) attached one after another through cnitool with host-local and detached again, each ADD and DEL timed (median, p99): " +
		"the trestle plugin on trestle, the bridge plugin on the Linux bridge; goal: a trestle ADD's and DEL's median and p99 each at most 1.2x the bridge plugin's (the churn of port-scale, alone)",
	DUTs:  lab.MustSpecs("linux-bridge", "trestle"),
	Hosts: 2, Chain: []int{1}, Tests: []lab.Kind{Kind{Pods: PodChurnDefault}}, Reps: 3, Timing: lab.DefaultTiming,
}

// Flags: --pods, the churn's pod count; a scenario without a churn
// refuses it.
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{{
		Name: "pods", Type: lab.FlagInt, Lo: 1, Hi: 4096, For: "the pod-churn and port-scale scenarios",
		Usage: fmt.Sprintf("pod-churn (and port-scale's churn): the pods added then deleted (default %d)", PodChurnDefault),
		Set:   lab.Sets(func(p Kind, n int) (Kind, error) { p.Pods = n; return p, nil }),
	}}
}

// Needs: after the unit's packet tests, on the unit's bridge.
func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.Stack} }

// Estimate: about 50 ms a CNI call.
func (p Kind) Estimate(lab.Scenario, lab.Spec) time.Duration {
	return time.Duration(2*p.Pods) * 50 * time.Millisecond
}

func (p Kind) Describe(lab.Scenario) string {
	return fmt.Sprintf("Pods:     %d CNI ADDs then %d DELs (cnitool, host-local IPAM): the trestle plugin on trestle, the bridge plugin on the Linux bridge", p.Pods, p.Pods)
}

func (Kind) Prepare(s lab.Scenario) ([]string, error) {
	return []string{"pod-churn: each ADD and DEL timed from cnitool's start to its exit, one at a time, in the DUT's namespace (cnitool and host-local from bin/tools, scripts/deps.sh tools); " +
		"the trestle plugin (bin/cni/trestle, beside the lab's trestle) with the daemon's socket, the bridge plugin from " + lab.BridgePluginDir + " (Debian's containernetworking-plugins); a DUT with neither is not run"}, nil
}

func (Kind) Section(run *lab.Run) (terminal, md string) {
	return podChurnSection(podChurnRows(run))
}

// churnSetup is what a unit's DUT runs its pods with: the plugin's type,
// its keys and CNI_PATH ("" type: the DUT has no plugin).
func churnSetup(d lab.DUT, tools string) (typ string, keys map[string]any, path string) {
	if pp, ok := d.(lab.PodPlugin); ok {
		return pp.PodPlugin(tools)
	}
	return "", nil, ""
}

func (p Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	t := u.Rig.T
	if t.DUT == nil || len(t.Bridges) == 0 {
		return nil
	}
	tools := filepath.Join(filepath.Dir(u.Rig.Env.Trestle), "tools")
	typ, keys, cniPath := churnSetup(u.Rig.DUT, tools)
	if typ == "" {
		return nil
	}
	r := u.Base
	r.Test, r.Param, r.Unit = TestPodChurn, typ+" plugin", "ms an ADD (median)"
	rec, err := p.churn(ctx, u, typ, keys, cniPath, tools)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.Error = err.Error()
		u.Add(r)
		return nil
	}
	r.Value = 1000 * lab.Median(rec.Add)
	if err := r.SetRecord(rec); err != nil {
		return err
	}
	u.Add(r)
	return nil
}

func (p Kind) churn(ctx context.Context, u *lab.UnitRun, typ string, keys map[string]any, cniPath, tools string) (Record, error) {
	rec := Record{Plugin: typ}
	t := u.Rig.T
	cnitool := filepath.Join(tools, "cnitool")
	for _, need := range []string{cnitool, filepath.Join(tools, "host-local")} {
		if _, err := os.Stat(need); err != nil {
			return rec, fmt.Errorf("pod-churn: %s is missing: run scripts/deps.sh tools", need)
		}
	}
	if typ == "bridge" {
		if _, err := os.Stat(filepath.Join(lab.BridgePluginDir, "bridge")); err != nil {
			return rec, fmt.Errorf("pod-churn: no bridge plugin in %s: install Debian's containernetworking-plugins (scripts/deps.sh)", lab.BridgePluginDir)
		}
	}
	dir, err := os.MkdirTemp(u.Rig.Env.WorkDir, "pod-churn-")
	if err != nil {
		return rec, err
	}
	defer os.RemoveAll(dir)
	if sock, ok := keys["socket"].(string); ok {
		// The plugin takes a socket under the daemon's run directory (or
		// the default, or one the node lists), not the run's own: a link
		// there names it, as an operator's would.
		link := filepath.Join("/run/trestle", "lab-"+filepath.Base(dir)+".sock")
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return rec, fmt.Errorf("pod-churn: %w", err)
		}
		if err := os.Symlink(sock, link); err != nil {
			return rec, fmt.Errorf("pod-churn: %w", err)
		}
		defer os.Remove(link)
		keys = maps.Clone(keys)
		keys["socket"] = link
	}
	name := "churn-" + lab.SafeName(t.DUT.Name)
	plugin := map[string]any{"type": typ, "bridge": t.Bridges[0].Name,
		"ipam": map[string]any{"type": "host-local", "dataDir": filepath.Join(dir, "ipam"), "ranges": [][]map[string]any{{{"subnet": "10.98.0.0/16"}}}}}
	for k, v := range keys {
		plugin[k] = v
	}
	b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": name, "plugins": []any{plugin}})
	if err != nil {
		return rec, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".conflist"), b, 0o644); err != nil {
		return rec, err
	}
	call := func(verb string, pod *lab.NS) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, "nsenter", "--net="+t.DUT.Path, "--", cnitool, verb, name, pod.Path)
		cmd.Env = append(os.Environ(), "CNI_PATH="+cniPath, "NETCONFPATH="+dir)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			return took, fmt.Errorf("cnitool %s %s: %w: %s", verb, pod.Name, err, lab.FirstLine(strings.TrimSpace(string(out))))
		}
		return took, nil
	}
	pods := make([]*lab.NS, p.Pods)
	added, deleted := 0, 0
	defer func() {
		// A churn that failed midway takes back what it added.
		for _, pod := range pods[deleted:added] {
			_, _ = call("del", pod)
		}
	}()
	for i := range pods {
		u.Status(fmt.Sprintf("pod-churn: %s plugin, ADD %d of %d", typ, i+1, p.Pods))
		if pods[i], err = t.Net.NS(fmt.Sprintf("pod%d", i)); err != nil {
			return rec, err
		}
		took, err := call("add", pods[i])
		if err != nil && i > 0 && ctx.Err() == nil {
			rec.Stopped = fmt.Sprintf("ADD %d of %d failed: %v", i+1, p.Pods, err)
			pods = pods[:i]
			u.Notef("pod-churn: " + rec.Stopped)
			break
		}
		if err != nil {
			return rec, err
		}
		added++
		rec.Add = append(rec.Add, took.Seconds())
	}
	for i, pod := range pods {
		u.Status(fmt.Sprintf("pod-churn: %s plugin, DEL %d of %d", typ, i+1, len(pods)))
		took, err := call("del", pod)
		if err != nil {
			return rec, err
		}
		deleted++
		rec.Del = append(rec.Del, took.Seconds())
	}
	return rec, nil
}

// podChurnRow is one DUT's churn: the medians and p99s over every
// repetition's ADDs and DELs together.
type podChurnRow struct {
	DUT, Plugin                    string
	AddMed, AddP99, DelMed, DelP99 float64 // seconds
	Calls                          int
	Stopped                        []string
	Errors                         []string
}

func podChurnRows(run *lab.Run) []podChurnRow {
	var out []podChurnRow
	for _, d := range run.DUTs {
		row := podChurnRow{DUT: d}
		var add, del []float64
		for _, r := range run.Results {
			if r.Test != TestPodChurn || r.DUT != d {
				continue
			}
			if r.Error != "" {
				row.Errors = append(row.Errors, r.Error)
				continue
			}
			var rec Record
			if err := r.RecordOf(&rec); err != nil {
				row.Errors = append(row.Errors, err.Error())
				continue
			}
			row.Plugin = rec.Plugin
			if rec.Stopped != "" {
				row.Stopped = append(row.Stopped, rec.Stopped)
			}
			add, del = append(add, rec.Add...), append(del, rec.Del...)
		}
		if len(add) == 0 && len(row.Errors) == 0 {
			continue
		}
		row.Calls = len(add)
		row.AddMed, row.AddP99, row.DelMed, row.DelP99 = lab.Quantile(add, 0.5), lab.Quantile(add, 0.99), lab.Quantile(del, 0.5), lab.Quantile(del, 0.99)
		out = append(out, row)
	}
	return out
}

// PodChurnGoal is how much longer than the bridge plugin's a trestle
// plugin's ADD or DEL may take, median and p99 alike.
const PodChurnGoal = 1.2

// podChurnSection is the churn table and the goal: a trestle ADD's and
// DEL's median and p99 each at most PodChurnGoal times the bridge
// plugin's.
func podChurnSection(rows []podChurnRow) (terminal, md string) {
	if len(rows) == 0 {
		return "", ""
	}
	var bridge *podChurnRow
	for i, r := range rows {
		if r.Plugin == "bridge" && r.Calls > 0 {
			bridge = &rows[i]
		}
	}
	ms := func(v float64) string { return fmt.Sprintf("%.1f ms", 1000*v) }
	head := []string{"DUT", "plugin", "ADD median", "ADD p99", "DEL median", "DEL p99", "x bridge plugin (ADD, p99; DEL, p99)", "pods"}
	// ratios are r's four figures against the bridge plugin's.
	ratios := func(r podChurnRow) [4]float64 {
		return [4]float64{r.AddMed / bridge.AddMed, r.AddP99 / bridge.AddP99, r.DelMed / bridge.DelMed, r.DelP99 / bridge.DelP99}
	}
	cells := func(r podChurnRow) []string {
		pods := fmt.Sprint(r.Calls)
		if len(r.Stopped) > 0 {
			pods += fmt.Sprintf(" (%d stopped short: %s)", len(r.Stopped), r.Stopped[0])
		}
		if len(r.Errors) > 0 {
			pods += fmt.Sprintf(" (%d failed: %s)", len(r.Errors), lab.FirstLine(r.Errors[0]))
		}
		if r.Calls == 0 {
			return []string{r.DUT, "-", "-", "-", "-", "-", "-", pods}
		}
		vs := "-"
		if r.Plugin != "bridge" && bridge != nil {
			x := ratios(r)
			vs = fmt.Sprintf("%.2fx, %.2fx; %.2fx, %.2fx", x[0], x[1], x[2], x[3])
		}
		return []string{r.DUT, r.Plugin, ms(r.AddMed), ms(r.AddP99), ms(r.DelMed), ms(r.DelP99), vs, pods}
	}
	var goals []string
	for _, r := range rows {
		if r.Plugin != "trestle" || r.Calls == 0 || bridge == nil {
			continue
		}
		x := ratios(r)
		pass := true
		for _, v := range x {
			pass = pass && v <= PodChurnGoal
		}
		goals = append(goals, fmt.Sprintf("%s: a trestle ADD %.2fx the bridge plugin's (median), %.2fx (p99); a DEL %.2fx, %.2fx (goal: each at most %.1fx): %s",
			r.DUT, x[0], x[1], x[2], x[3], PodChurnGoal, lab.PassWord(pass)))
	}
	var cellRows [][]string
	for _, r := range rows {
		cellRows = append(cellRows, cells(r))
	}
	return lab.TableSection("pod-churn, CNI ADDs then DELs one at a time through cnitool with host-local (median and p99 over every repetition's calls):",
		"Pod churn", "CNI ADDs, one after another, then their DELs, each timed from cnitool's start to its exit in the DUT's namespace, with the host-local IPAM plugin: the trestle plugin on trestle, the `bridge` plugin on the Linux bridge. Median and p99 over every repetition's calls, and each against the bridge plugin's.",
		head, cellRows, goals)
}
