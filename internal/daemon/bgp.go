package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/overlay"
)

// BGP's word on withdrawals (internal/overlay's bgp.go, docs/overlay.md
// "FRR restarts"): FRR 8.4's bgpd drops a peer's EVPN routes as soon as
// its session goes, graceful restart or not, so a peer's FRR restart looks,
// from the kernel, like the peer withdrawing its VNI. bgpLoop asks bgpd
// (vtysh, [daemon] frr_vty_dir) which session carried each remote VTEP and
// how the sessions are, so that the Manager keeps the entries of a peer
// whose session went until it is back, and removes after StaleWait those
// a peer withdrew over a live session.

const (
	// bgpPoll is how often bgpd is asked while something is stale (the
	// Manager will ask whether its session went), and the loop's tick;
	// bgpDue says when a query is due.
	bgpPoll = 250 * time.Millisecond
	// bgpRefresh is how often it is asked otherwise: which session
	// carries which VTEP, and whether bgpd answers at all (this host's
	// bgpd restarting alone is seen by its silence).
	bgpRefresh = 30 * time.Second
	// bgpTimeout bounds one query.
	bgpTimeout = 2 * time.Second
)

// bgpLog is what bgpLoop said of bgpd: that it cannot be asked (warned),
// that it went silent after answering (silent), that it answered (seen),
// that its answer could not be read (unreadable).
type bgpLog struct{ warned, silent, seen, unreadable bool }

// bgpLoop asks bgpd about its EVPN sessions while the daemon holds VNIs,
// as often as the Manager needs (bgpDue).
func (d *Daemon) bgpLoop(ctx context.Context) {
	tick := time.NewTicker(bgpPoll)
	defer tick.Stop()
	var last time.Time
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if len(d.ovl.mgr.Held()) == 0 {
			continue
		}
		stale, unknown := d.ovl.mgr.BGPNeeds(d.ovl.bgp.Knows)
		once, _ := d.ovl.bgp.Answering()
		if time.Since(last) < bgpDue(stale, unknown, once, fails) {
			continue
		}
		last = time.Now()
		if d.askBGP(ctx) {
			fails = 0
		} else {
			fails++
		}
	}
}

// bgpDue is how long after the last query the next one is due: bgpPoll
// while something is stale and bgpd has answered (Away asks whether its
// session went; a bgpd that never answered holds nothing, so there is
// nothing to poll for); a second while a flood-list VTEP's session is not
// known, doubled after each query in a row bgpd did not answer (fails),
// up to bgpRefresh: a host whose bgpd is not there, or cannot be asked
// (vtysh refused its socket), starts no vtysh every second for ever;
// else bgpRefresh.
func bgpDue(stale, unknown, once bool, fails int) time.Duration {
	switch {
	case stale && once:
		return bgpPoll
	case unknown:
		return min(bgpRefresh, time.Second<<min(fails, 5))
	}
	return bgpRefresh
}

// askBGP asks bgpd once and enters its answer (or its silence) in the
// BGPView, timed by the Manager's clock, and says what changed in the log.
// It says whether bgpd answered.
func (d *Daemon) askBGP(ctx context.Context) bool {
	d.mu.Lock()
	dir := config.DefaultFRRVtyDir
	if d.cfg != nil {
		dir = d.cfg.Daemon.FRRVtyDir
	}
	d.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, bgpTimeout)
	at := d.ovl.mgr.Now()
	summary, routes, err := d.ovl.bgpQuery(qctx, dir)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	err = d.ovl.bgp.Update(at, summary, routes, err)
	once, _ := d.ovl.bgp.Answering()
	l := &d.ovl.bgpLog
	switch {
	case errors.Is(err, overlay.ErrUnreadable):
		if !l.unreadable {
			l.unreadable = true
			d.log.Warn("overlay: bgpd's answer about its EVPN sessions cannot be read; a remote address zebra withdraws goes after the wait until it can",
				"frr_vty_dir", dir, "wait", overlay.StaleWait, "err", err)
		}
		return false
	case err != nil && !once && !l.warned:
		l.warned = true
		d.log.Warn("overlay: cannot ask bgpd about its EVPN sessions; a remote address zebra withdraws goes after the wait, whether its peer withdrew it or its session went (an FRR restart)",
			"frr_vty_dir", dir, "wait", overlay.StaleWait, "err", err)
	case err != nil && once && !l.silent:
		l.silent = true
		d.log.Warn("overlay: bgpd does not answer (restarting?); the remote addresses zebra withdraws are kept, stale, until it answers again",
			"frr_vty_dir", dir, "limit", overlay.HoldLimit, "err", err)
	case err == nil && l.silent:
		l.silent = false
		d.log.Info("overlay: bgpd answers again")
	case err == nil && !l.seen:
		l.seen, l.warned = true, false
		d.log.Info("overlay: bgpd answers about its EVPN sessions: a peer's remote addresses are kept while its session is away", "frr_vty_dir", dir)
	}
	if err == nil {
		l.unreadable = false
	}
	return err == nil
}
