package daemon

import (
	"fmt"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// notify tells systemd (a Type=notify service, dist/trestle.service) how
// the daemon stands: READY=1 once the datapath is up and the control
// socket answers, RELOADING=1 then READY=1 around a reload, STOPPING=1.
// Outside systemd (no NOTIFY_SOCKET) it does nothing.
func (d *Daemon) notify(states ...string) {
	msg := ""
	for _, s := range states {
		msg += s + "\n"
	}
	if _, err := sd.SdNotify(false, msg); err != nil {
		d.log.Warn("tell systemd", "state", states, "err", err)
	}
}

func statusLine(format string, args ...any) string { return "STATUS=" + fmt.Sprintf(format, args...) }

// watchdog is the ticker of systemd's watchdog (WatchdogSec= in the unit:
// WATCHDOG_USEC), at half its timeout, or nil outside it. The main loop
// feeds it (feedWatchdog) between its other work, so a daemon stuck in a
// reconcile, a sweep or its lock stops feeding and systemd restarts it; with
// persist the datapath forwards on through the restart.
func (d *Daemon) watchdog() *time.Ticker {
	every, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		d.log.Warn("systemd watchdog", "err", err)
		return nil
	}
	if every <= 0 {
		return nil
	}
	return time.NewTicker(every / 2)
}

// feedWatchdog tells systemd the daemon is alive once it has taken and
// released its lock: what every control request and reconcile needs.
func (d *Daemon) feedWatchdog() {
	d.mu.Lock()
	d.mu.Unlock() //nolint:staticcheck // an empty critical section: the lock is free
	d.notify(sd.SdNotifyWatchdog)
}
