package reconcile

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/trestle/trestle/tests/harness"
)

// TestReloadGrowsHitless: a stream h1 -> h2 on a running bridge loses no
// frame and floods none while one reload adds a bridge of 65,536 entries
// (more than the table loaded for the first holds) and another shortens
// the new bridge's aging under four times the refresh: the daemon loads its
// datapath again for each, and moves every port to it in place. A third
// reload, which takes the bridge away, loads nothing. In both attach modes,
// with and without persist (which pins the grown table for the next daemon).
func TestReloadGrowsHitless(t *testing.T) {
	t.Parallel()
	for _, persist := range []bool{false, true} {
		for _, mode := range []string{"xdp", "tc"} {
			name := mode
			if persist {
				name += "-persist"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				reloadGrows(t, mode, persist)
			})
		}
	}
}

func reloadGrows(t *testing.T, mode string, persist bool) {
	var l *harness.Lab
	if persist {
		l = harness.NewPersistLab(t, 4, nil)
	} else {
		l = harness.NewLab(t, 4)
	}
	// br0: h1, h2, h3 (the stream's); br1, when there: h4.
	cfg := func(br1 bool, aging string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "[daemon]\nsocket = %q\npersist = %v\n\n[[bridge]]\nname = \"br0\"\n", l.Sock, persist)
		port := func(i int) {
			fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\nmode = %q\n", harness.PortName(i), mode)
		}
		for i := 1; i <= 3; i++ {
			port(i)
		}
		if br1 {
			fmt.Fprintf(&b, "\n[[bridge]]\nname = \"br1\"\nmax_entries = 65536\n")
			if aging != "" {
				fmt.Fprintf(&b, "aging = %q\n", aging)
			}
			port(4)
		}
		return b.String()
	}
	l.WriteConfig(cfg(false, ""))
	if persist {
		l.StartNet(harness.Bin)
	} else {
		l.Start()
	}
	for _, j := range []int{2, 3} {
		if err := l.Host(1).Ping(harness.HostIP(j), 2); err != nil {
			t.Fatalf("ping h1 -> h%d: %v", j, err)
		}
	}
	rx0 := l.Stats(harness.PortName(1)).Counters.Get("rx_packets")
	reload := func(body string) {
		t.Helper()
		l.WriteConfig(body)
		out, err := l.CLI("reload")
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
	}

	s := l.StartStream(8*time.Second, 1500*time.Millisecond)
	s.Step("reload: add br1, max_entries 65536", func() { reload(cfg(true, "")) })
	s.Step("reload: br1's aging 2s", func() { reload(cfg(true, "2s")) })
	s.Step("reload: br1 goes", func() { reload(cfg(false, "")) })
	g := s.Lossless()

	log := l.Daemon.Out.String()
	if n := strings.Count(log, "datapath loaded again for new sizes"); n != 2 {
		t.Errorf("the datapath was loaded again %d times, want 2 (the table, then the refresh):\n%s", n, log)
	}
	for _, want := range []string{"need a learning table of 133120 entries (it holds 66560)", "refreshed every 500ms (now every 1s)"} {
		if !strings.Contains(log, want) {
			t.Errorf("the daemon did not say why it loaded the datapath again (%q):\n%s", want, log)
		}
	}
	if e, ok := l.FDBEntry(harness.HostMAC(2)); !ok || e.Port != harness.PortName(2) {
		t.Errorf("h2's entry after the reloads: %+v (found %v)", e, ok)
	}
	if rx := l.Stats(harness.PortName(1)).Counters.Get("rx_packets"); rx < rx0+g.Sent {
		t.Errorf("port-h1 counted %d frames, want at least %d + %d: counters restarted", rx, rx0, g.Sent)
	}
	if persist {
		// The next daemon adopts the grown table, not the one it replaced.
		pins, _ := filepath.Glob(filepath.Join(l.Show().PinDir, "fdb-*"))
		if len(pins) != 1 {
			t.Fatalf("fdb pins: %v", pins)
		}
		m, err := ebpf.LoadPinnedMap(pins[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		if size := m.MaxEntries(); size != 133120 {
			t.Errorf("the pinned table holds %d entries, want the grown 133120", size)
		}
		m.Close()
		return // NewPersistLab's cleanup stops the daemon and takes the datapath down
	}
	l.Stop()
}
