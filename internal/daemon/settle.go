package daemon

import "github.com/trestle/trestle/internal/datapath"

// settler takes ahead of time the waits that the next write of the
// bridges would take on its way (datapath.SettleBegin): the grace period
// after a bridge's flip, and flood sets given the size their members need.
type settler interface {
	SettleBegin() *datapath.Settle
	SettleEnd(*datapath.Settle)
}

// settleLater takes, beside whatever comes next, the waits (RCU grace
// periods: 7-15 ms each on a busy machine) that the next port.add or
// port.del would otherwise take in its bridge's write while its caller
// waits. Called with d.mu held at the end of every apply; the waits do
// not hold it, and shutdown waits for them (d.settling) before the
// datapath closes, which ends a settle this did not end.
func (d *Daemon) settleLater() {
	s, ok := d.topo.(settler)
	if !ok || d.closed {
		return
	}
	run := s.SettleBegin()
	if run == nil {
		return
	}
	d.settling.Add(1)
	go func() {
		defer d.settling.Done()
		err := run.Wait()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			return
		}
		if err != nil {
			d.log.Warn("wait for the bridges' writes ahead of the next", "err", err)
		}
		s.SettleEnd(run)
	}()
}
