package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// The filter stage as the daemon runs it: each bridge's running rules (the
// config's, or as `trestle rule add/del` left them until the next reload
// from the file), compiled by the dataplane with the bridge (desired).

// noSlot is the slot of a rule's port that has none: no frame's port, so
// the rule matches nothing (the config checked the name; a port without a
// slot cannot be).
const noSlot = 0xffff

// rules are the bridge's running rules.
func (b *bridgeState) rules() []config.Rule {
	if b.cliRules != nil {
		return *b.cliRules
	}
	return b.cfg.Rules
}

// filter is the bridge's filter as the dataplane takes it; nil: off.
func (b *bridgeState) filter() *datapath.Filter {
	if !b.cfg.Filter {
		return nil
	}
	f := &datapath.Filter{DefaultBlock: b.cfg.DefaultBlock,
		MaxStates: uint32(b.cfg.MaxStates), MaxPortStates: uint32(b.cfg.MaxPortStates)}
	slot := func(name string) uint16 {
		if name == "" {
			return 0
		}
		if p := b.port(name); p != nil && p.slot != 0 {
			return p.slot
		}
		return noSlot
	}
	for _, r := range b.rules() {
		f.Rules = append(f.Rules, datapath.FilterRule{
			Block: r.Block, KeepState: r.KeepState,
			In: slot(r.In), Out: slot(r.Out),
			EtherType: r.EtherType, VLAN: r.VLAN,
			Proto: r.Proto, HasProto: r.HasProto, ICMPType: r.ICMPType, HasICMPType: r.HasICMPType,
			Src: r.Src, Dst: r.Dst,
			SrcPort: datapath.PortRange(r.SrcPort), DstPort: datapath.PortRange(r.DstPort),
			SrcMAC: r.SrcMAC, DstMAC: r.DstMAC,
		})
	}
	return f
}

// anyFilter says whether a bridge of the next model filters.
func (c *change) anyFilter() bool {
	return slices.ContainsFunc(c.order, func(b *bridgeState) bool { return b.cfg.Filter })
}

// ruleRow is a rule as `rule show` prints it.
func ruleRow(bridge string, i int, r config.Rule) ctl.Rule {
	row := ctl.Rule{Bridge: bridge, Index: i + 1, Action: config.ActionPass, In: r.In, Out: r.Out,
		KeepState: r.KeepState, VLAN: r.VLAN}
	if r.Block {
		row.Action = config.ActionBlock
	}
	if r.EtherType != 0 {
		row.EtherType = config.EtherTypeName(r.EtherType)
	}
	if r.HasProto {
		row.Proto = config.ProtoName(r.Proto)
	}
	if r.Src.IsValid() {
		row.Src = prefixString(r.Src.String(), r.Src.Bits() == r.Src.Addr().BitLen())
	}
	if r.Dst.IsValid() {
		row.Dst = prefixString(r.Dst.String(), r.Dst.Bits() == r.Dst.Addr().BitLen())
	}
	if r.SrcPort.Set() {
		row.SrcPort = r.SrcPort.String()
	}
	if r.DstPort.Set() {
		row.DstPort = r.DstPort.String()
	}
	if r.SrcMAC != nil {
		row.SrcMAC = r.SrcMAC.String()
	}
	if r.DstMAC != nil {
		row.DstMAC = r.DstMAC.String()
	}
	if r.HasICMPType {
		t := r.ICMPType
		row.ICMPType = &t
	}
	return row
}

// prefixString writes a whole-length prefix as its bare address, as the
// config may.
func prefixString(s string, host bool) string {
	if host {
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] == '/' {
				return s[:i]
			}
		}
	}
	return s
}

// ruleShow lists each bridge's running rules in order, with what each
// decided, then the frames passed by tracked connections and the default.
func (d *Daemon) ruleShow(only string) ([]ctl.Rule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(only)
	if err != nil {
		return nil, err
	}
	rows := []ctl.Rule{}
	for _, b := range bs {
		rules := b.rules()
		var counts datapath.FilterCounts
		on := false
		if b.cfg.Filter {
			if counts, on, err = d.counters.FilterCounters(b.id); err != nil {
				return nil, fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
			}
		}
		for i, r := range rules {
			row := ruleRow(b.cfg.Name, i, r)
			row.Off = !on
			if on && i < len(counts.Rules) {
				row.Packets, row.Bytes = counts.Rules[i].Packets, counts.Rules[i].Bytes
			}
			rows = append(rows, row)
		}
		def := config.ActionPass
		if b.cfg.DefaultBlock {
			def = config.ActionBlock
		}
		rows = append(rows,
			ctl.Rule{Bridge: b.cfg.Name, Action: config.ActionPass, State: true, Off: !on, Packets: counts.State.Packets, Bytes: counts.State.Bytes},
			ctl.Rule{Bridge: b.cfg.Name, Action: def, Default: true, Off: !on, Packets: counts.Default.Packets, Bytes: counts.Default.Bytes})
	}
	return rows, nil
}

// ruleAdd puts a rule into a bridge's running set at req.Index (from 1; 0:
// last), until the next reload from the file.
func (d *Daemon) ruleAdd(req ctl.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.bridges[req.Bridge]
	if !ok {
		return errNoBridge(req.Bridge)
	}
	r, err := config.ParseRuleArgs(&b.cfg, req.Args)
	if err != nil {
		return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
	}
	rules := slices.Clone(b.rules())
	if len(rules) >= config.MaxRules {
		return fmt.Errorf("bridge %q has %d rules, the most it may", b.cfg.Name, config.MaxRules)
	}
	at := len(rules)
	if req.Index != 0 {
		if req.Index < 1 || req.Index > len(rules)+1 {
			return fmt.Errorf("--at %d: bridge %q has %d rules; give 1..%d", req.Index, b.cfg.Name, len(rules), len(rules)+1)
		}
		at = req.Index - 1
	}
	rules = slices.Insert(rules, at, r)
	if err := d.setRules(b, rules); err != nil {
		return err
	}
	d.log.Info("rule added", "bridge", b.cfg.Name, "index", at+1, "rule", req.Args, "filter", onOff(b.cfg.Filter))
	return nil
}

// ruleDel removes rule req.Index (from 1) of a bridge's running set.
func (d *Daemon) ruleDel(req ctl.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.bridges[req.Bridge]
	if !ok {
		return errNoBridge(req.Bridge)
	}
	rules := slices.Clone(b.rules())
	if req.Index < 1 || req.Index > len(rules) {
		if len(rules) == 0 {
			return fmt.Errorf("bridge %q has no rules", b.cfg.Name)
		}
		return fmt.Errorf("rule %d: bridge %q has rules 1..%d", req.Index, b.cfg.Name, len(rules))
	}
	rules = slices.Delete(rules, req.Index-1, req.Index)
	if err := d.setRules(b, rules); err != nil {
		return err
	}
	d.log.Info("rule deleted", "bridge", b.cfg.Name, "index", req.Index)
	return nil
}

// setRules makes rules the bridge's running set and writes the bridge
// with them; on failure the running set stays as it was.
func (d *Daemon) setRules(b *bridgeState, rules []config.Rule) error {
	was := b.cliRules
	b.cliRules = &rules
	if !b.cfg.Filter {
		return nil // kept: in `rule show`, not applied
	}
	want := b.desired()
	if err := d.topo.SetBridge(want); err != nil {
		b.cliRules = was
		return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
	}
	b.info = &want
	return nil
}

// stateShow lists the tracked connections.
func (d *Daemon) stateShow(only string) ([]ctl.State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if only != "" {
		if _, ok := d.bridges[only]; !ok {
			return nil, errNoBridge(only)
		}
	}
	byID := map[uint16]*bridgeState{}
	for _, b := range d.bridges {
		byID[b.id] = b
	}
	ss, err := d.conns.States()
	if err != nil {
		return nil, err
	}
	rows := []ctl.State{}
	for _, s := range ss {
		b := byID[s.Bridge]
		if b == nil || (only != "" && b.cfg.Name != only) {
			continue
		}
		st := "opening"
		switch {
		case s.Closing:
			st = "closing"
		case s.Established:
			st = "established"
		}
		rows = append(rows, ctl.State{Bridge: b.cfg.Name, VLAN: s.VLAN, Proto: config.ProtoName(s.Proto),
			From: s.From.String(), To: s.To.String(), State: st, Rule: s.Rule + 1,
			AgeSeconds:     time.Duration(s.AgeNs).Seconds(),
			IdleSeconds:    time.Duration(s.IdleNs).Seconds(),
			ExpiresSeconds: time.Duration(s.ExpiresNs).Seconds()})
	}
	slices.SortFunc(rows, func(a, b ctl.State) int {
		if c := cmp.Compare(a.Bridge, b.Bridge); c != 0 {
			return c
		}
		return cmp.Compare(a.From+a.To, b.From+b.To)
	})
	return rows, nil
}

// sweepStates removes the connections that timed out, and those of
// bridges that no longer filter.
func (d *Daemon) sweepStates() error {
	d.mu.Lock()
	keep := map[uint16]bool{}
	for _, b := range d.bridges {
		if b.cfg.Filter {
			keep[b.id] = true
		}
	}
	d.mu.Unlock()
	_, err := d.conns.AgeStates(func(id uint16) bool { return keep[id] })
	return err
}
