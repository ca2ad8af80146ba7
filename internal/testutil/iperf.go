package testutil

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// iperfPort hands out server ports, starting from a random base so that
// leftovers of an earlier run cannot be mistaken for this run's server.
var iperfPort atomic.Uint32

func init() { iperfPort.Store(20000 + rand.Uint32N(20000)) }

const (
	iperfReadyTimeout = 5 * time.Second
	// iperfSlack covers connection setup and teardown beyond the test time.
	iperfSlack = 30 * time.Second
)

// Iperf measures TCP throughput from client to server's serverAddr for secs
// seconds over streams parallel streams. It starts a one-shot `iperf3 -s -1`
// in server on a port of its own, waits until it listens, runs `iperf3 -c
// serverAddr -J` in client, and returns end.sum_received.bits_per_second.
// Errors include iperf3's own message.
func Iperf(t testing.TB, server *NS, serverAddr string, client *NS, secs int, streams int) (float64, error) {
	t.Helper()
	secs, streams = max(secs, 1), max(streams, 1)
	port := strconv.Itoa(int(iperfPort.Add(1)))

	srv := server.Start(t, "iperf3", "-s", "-1", "-p", port)
	if err := waitListen(server, srv, port); err != nil {
		return 0, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+iperfSlack)
	defer cancel()
	cmd := client.commandContext(ctx, "iperf3", "-c", serverAddr, "-p", port, "-t", strconv.Itoa(secs),
		"-P", strconv.Itoa(streams), "--connect-timeout", "3000", "-J")
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	jsonErr := json.Unmarshal(stdout.Bytes(), &res)
	what := fmt.Sprintf("iperf3 netns %s -> %s:%s (netns %s)", client.Name, serverAddr, port, server.Name)
	switch {
	case res.Error != "":
		return 0, fmt.Errorf("%s: %s (exit: %v, stderr: %s)", what, res.Error, runErr, bytes.TrimSpace(stderr.Bytes()))
	case runErr != nil:
		return 0, fmt.Errorf("%s: %w: %s%s", what, runErr, bytes.TrimSpace(stderr.Bytes()), truncate(stdout.String(), 2000))
	case jsonErr != nil:
		return 0, fmt.Errorf("%s: parse JSON: %w: %s", what, jsonErr, truncate(stdout.String(), 2000))
	case res.End.SumReceived.BitsPerSecond <= 0:
		return 0, fmt.Errorf("%s: no bits received: %s", what, truncate(stdout.String(), 2000))
	}
	return res.End.SumReceived.BitsPerSecond, nil
}

// waitListen waits until something listens on TCP port inside n, or p exits.
// It must not connect to find out: a one-shot iperf3 server would take the
// probe for its one test.
func waitListen(n *NS, p *Proc, port string) error {
	deadline := time.Now().Add(iperfReadyTimeout)
	for {
		out, err := n.Exec("ss", "-Hltn", "sport", "=", ":"+port)
		if err != nil {
			return fmt.Errorf("wait for iperf3 server on port %s: %w", port, err)
		}
		if strings.TrimSpace(out) != "" {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("iperf3 server in netns %s exited before listening on port %s: %v: %s",
				n.Name, port, p.Err(), strings.TrimSpace(p.Out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("iperf3 server in netns %s not listening on port %s after %v: %s",
				n.Name, port, iperfReadyTimeout, strings.TrimSpace(p.Out.String()))
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
