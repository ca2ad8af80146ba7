package metrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// The switch namespace's own loopback: no other process can be there.
const metricsAddr = "127.0.0.1:9470"

// scrape fetches /metrics from the daemon in the switch namespace: the
// connection is made there, the request and reply go over it from here.
func scrape(l *harness.Lab) (string, map[string]*dto.MetricFamily) {
	l.T.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := l.SW.Do(func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}}
	var body []byte
	var err error
	for try := 0; try < 50; try++ {
		var resp *http.Response
		if resp, err = client.Get("http://" + metricsAddr + "/metrics"); err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("status %s: %s", resp.Status, body)
			}
			if err == nil {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		l.T.Fatalf("scrape %s: %v", metricsAddr, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		l.T.Fatalf("parse the scrape: %v\n%s", err, body)
	}
	return string(body), mfs
}

// value is the sample of family name whose labels include want; -1 if none.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	return -1
}

// TestMetrics: a live scrape passes promtool's check; a ping through the
// bridge raises the rx and tx series of the ports it crossed, and only
// those; a dropped frame appears with its reason.
func TestMetrics(t *testing.T) {
	t.Parallel()
	testutil.RequireCmd(t, "promtool")
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 3)
			cfg := l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
			l.WriteConfig(strings.Replace(cfg, "[daemon]\n", "[daemon]\nmetrics = \""+metricsAddr+"\"\n", 1))
			l.Start()
			l.PingAll()

			_, before := scrape(l)
			const pings = 5
			if err := l.Host(1).Ping(harness.HostIP(2), pings); err != nil {
				t.Fatal(err)
			}
			runt := testutil.Frame(harness.HostMAC(2), harness.HostMAC(1), 0x0800, make([]byte, 6))
			if err := l.Host(1).RawSend("eth0", runt); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			body, after := scrape(l)

			delta := func(name string, labels map[string]string) float64 {
				b, a := value(before, name, labels), value(after, name, labels)
				if a < 0 || b < 0 {
					t.Fatalf("no %s%v in the scrape", name, labels)
				}
				return a - b
			}
			port := func(i int) map[string]string { return map[string]string{"bridge": "br0", "port": harness.PortName(i)} }
			// h1 sends the requests (and the runt), h2 the replies.
			for _, c := range []struct {
				metric string
				host   int
			}{
				{"trestle_port_rx_packets_total", 1}, {"trestle_port_tx_packets_total", 2},
				{"trestle_port_rx_packets_total", 2}, {"trestle_port_tx_packets_total", 1},
			} {
				if d := delta(c.metric, port(c.host)); d < pings {
					t.Errorf("%s of %s rose by %v, want at least %d", c.metric, harness.PortName(c.host), d, pings)
				}
			}
			// Each echo request is at least Ethernet, IPv4 and ICMP headers.
			if d := delta("trestle_port_rx_bytes_total", port(1)); d < pings*(14+20+8) {
				t.Errorf("rx bytes of %s rose by %v, want at least %d", harness.PortName(1), d, pings*(14+20+8))
			}
			for _, m := range []string{"trestle_port_rx_packets_total", "trestle_port_tx_packets_total"} {
				if d := delta(m, port(3)); d >= pings {
					t.Errorf("%s of %s, which the pings did not cross, rose by %v", m, harness.PortName(3), d)
				}
			}
			drop := map[string]string{"bridge": "br0", "port": harness.PortName(1), "reason": "runt"}
			if d := delta("trestle_port_drops_total", drop); d != 1 {
				t.Errorf("runt drops of %s rose by %v, want 1", harness.PortName(1), d)
			}
			for i := 1; i <= 3; i++ {
				if v := value(after, "trestle_port_up", map[string]string{"bridge": "br0", "port": harness.PortName(i), "mode": mode}); v != 1 {
					t.Errorf("trestle_port_up of %s in mode %s: %v, want 1", harness.PortName(i), mode, v)
				}
			}
			if v := value(after, "trestle_fdb_entries", map[string]string{"bridge": "br0"}); v != 3 {
				t.Errorf("trestle_fdb_entries of br0: %v, want 3", v)
			}

			// promtool's lint: names, units, help texts, types.
			cmd := exec.Command("promtool", "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool check metrics: %v\n%s", err, out)
			}
			l.Stop()
		})
	}
}

// TestMetricsIdleClients: 50 clients that connect to the endpoint and say
// nothing, and 50 that keep their connection alive after a scrape, take
// every connection the endpoint allows; a scrape still gets its answer
// within 5 s: the one idle longest gives way to it.
func TestMetricsIdleClients(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
	l.WriteConfig(strings.Replace(l.Config("", nil), "[daemon]\n", "[daemon]\nmetrics = \""+metricsAddr+"\"\n", 1))
	l.Start()
	scrape(l) // it answers

	dial := func() (net.Conn, error) {
		var c net.Conn
		err := l.SW.Do(func() (err error) {
			c, err = net.DialTimeout("tcp", metricsAddr, 2*time.Second)
			return err
		})
		return c, err
	}
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 50 {
		c, err := dial()
		if err != nil {
			t.Fatalf("idle client: %v", err)
		}
		idle = append(idle, c)
	}
	// Kept alive: a whole request, the answer read, the connection left
	// open.
	var alive []net.Conn
	for range 50 {
		c, err := dial()
		if err != nil {
			t.Fatalf("keep-alive client: %v", err)
		}
		idle = append(idle, c)
		alive = append(alive, c)
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Their answers (or not: one taken for a newer connection is closed,
	// one that waits for a place waits no longer than this).
	until := time.Now().Add(2 * time.Second)
	for _, c := range alive {
		c.SetReadDeadline(until)
		_, _ = c.Read(make([]byte, 512))
	}

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial()
		},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("a scrape beside 100 idle clients: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "trestle_") {
		t.Fatalf("a scrape beside 100 idle clients: %s, %v\n%.300s", resp.Status, err, body)
	}
}
