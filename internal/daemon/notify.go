package daemon

import (
	"fmt"

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
