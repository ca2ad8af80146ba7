package daemon

import (
	"fmt"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
)

// Episodes: a bridge whose table is full (sources forwarded unlearned_full,
// or in the builds with VLANs drops of reason table_full), a
// port at its max_macs (drops of reason mac_limit, or with
// mac_limit_action "forward" frames forwarded unlearned) or a port whose
// guard drops frames (one episode per guard reason) is logged once
// when its counter starts rising, and once when it has stayed flat for
// episodeQuiet, with what it counted in between: not once a frame, nor once
// a look. The counters are the datapath's; the daemon looks at them every
// eventTick (watchEvents).

const episodeQuiet = 10 * time.Second

// guardFlags are the port keys whose drops are guard episodes, and
// guardReasons those drops' reasons.
const guardFlags = tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD | tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD | tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD

var guardReasons = []tbpf.DropReason{tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ARP, tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ND,
	tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_IP, tbpf.TrestleTrDropReasonTR_DROP_RA_GUARD, tbpf.TrestleTrDropReasonTR_DROP_DHCP_GUARD}

// reading follows a counter from one look to the next.
type reading struct {
	primed bool
	last   uint64
}

// rise is how much the counter rose since the last look. The first look
// only sets where counting starts: what was counted before the daemon
// looked (an adopted datapath's) is no episode; nor is a counter that went
// back (a port's slot reset).
func (r *reading) rise(v uint64) uint64 {
	var d uint64
	if r.primed && v >= r.last {
		d = v - r.last
	}
	r.primed, r.last = true, v
	return d
}

// episode is one bridge's or port's trouble, from its counters' rises.
type episode struct {
	active         bool
	started, risen time.Time // the episode's first rise, and its last
	count          uint64    // what it counted during the episode
}

// add takes what the counters rose by since the last look. It says whether
// an episode starts (count: this rise) or ends (count: the episode's
// total).
func (e *episode) add(rise uint64, now time.Time, quiet time.Duration) (start, end bool) {
	switch {
	case rise > 0 && !e.active:
		e.active, e.started, e.risen, e.count = true, now, now, rise
		return true, false
	case rise > 0:
		e.risen = now
		e.count += rise
	case e.active && now.Sub(e.risen) >= quiet:
		e.active = false
		return false, true
	}
	return false, false
}

// episodes are the counters and episodes followed, by what they are of.
type episodes struct {
	readings map[string]*reading
	byKey    map[string]*episode
}

func newEpisodes() *episodes {
	return &episodes{readings: map[string]*reading{}, byKey: map[string]*episode{}}
}

// lookAtEpisodes reads the counters and logs the episodes that start and
// end. Bridges and ports no longer configured are forgotten (an episode of
// one ends without a line: its removal was logged).
func (d *Daemon) lookAtEpisodes(eps *episodes, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	rise := func(key string, v uint64) uint64 {
		seen[key] = true
		r := eps.readings[key]
		if r == nil {
			r = &reading{}
			eps.readings[key] = r
		}
		return r.rise(v)
	}
	episode := func(key string, n uint64, e ctl.Event) {
		seen[key] = true
		ep := eps.byKey[key]
		if ep == nil {
			ep = &episode{}
			eps.byKey[key] = ep
		}
		start, end := ep.add(n, now, episodeQuiet)
		switch {
		case start:
			e.Count = ep.count
		case end:
			e.Event += "_end"
			e.Count = ep.count
			e.Seconds = ep.risen.Sub(ep.started).Round(time.Second).Seconds()
		default:
			return
		}
		d.events.emit(e)
	}
	bs, _ := d.sortedBridges("")
	for _, b := range bs {
		var full uint64
		for _, p := range b.ports {
			s, err := d.counters.Stats(p.slot)
			if err != nil {
				continue
			}
			// The slot is part of a port's keys: a port given another
			// slot counts from its own zero.
			port := fmt.Sprintf("%d/%s/%d", b.id, p.key(), p.slot)
			// A full table forwards what it cannot learn (issue 29),
			// counted unlearned_full; the builds with VLANs drop it.
			full += rise("full/"+port, s.Drops[tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL]+s.C[tbpf.UnlearnedFull])
			if p.cfg.Policy.Flags&guardFlags != 0 {
				for _, r := range guardReasons {
					key := "guard/" + r.String() + "/" + port
					episode(key, rise(key, s.Drops[r]), ctl.Event{Event: ctl.EventGuard, Bridge: b.cfg.Name, Port: p.name(), Reason: r.String()})
				}
			}
			if p.cfg.MaxMACs == 0 {
				continue
			}
			action := config.LimitDrop
			if p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_LIMIT_FORWARD) {
				action = config.LimitForward
			}
			n := rise("limit/"+port, s.Drops[tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT]+s.C[tbpf.Unlearned]-s.C[tbpf.UnlearnedFull])
			episode("limit/"+port, n, ctl.Event{Event: ctl.EventMACLimit, Bridge: b.cfg.Name, Port: p.name(), Action: action, Limit: p.cfg.MaxMACs})
		}
		episode(fmt.Sprintf("full/%d", b.id), full, ctl.Event{Event: ctl.EventTableFull, Bridge: b.cfg.Name, Limit: b.cfg.MaxEntries})
	}
	for k := range eps.readings {
		if !seen[k] {
			delete(eps.readings, k)
		}
	}
	for k := range eps.byKey {
		if !seen[k] {
			delete(eps.byKey, k)
		}
	}
}
