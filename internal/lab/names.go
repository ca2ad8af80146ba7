package lab

// The names of the tests whose results the core's report puts in its
// tables of medians and ratios, and of the kinds that other kinds run
// after (Register) or that `trestle lab` checks its flags against: their
// kinds are packages of internal/lab/kinds, which the core does not
// import, and a kind imports no other kind.

// The RFC 2544 kinds' names, their results' Test.
const (
	TestThroughput = "throughput"   // RFC 2544 26.1, from h1 to h2
	TestLatency    = "latency"      // RFC 2544 26.2, at fractions of the throughput
	TestLoss       = "loss"         // RFC 2544 26.3, the frame loss curve
	TestB2B        = "back-to-back" // RFC 2544 26.4
)

// TestFlood: broadcast from h1 to every other host, throughput.
const TestFlood = "flood"

const (
	TestCache = "cache" // RFC 2889 5.7, address caching capacity
	TestLearn = "learn" // RFC 2889 5.8, address learning rate
)

const (
	TestTCP = "tcp" // iperf3 TCP, h1 to h2, per stream count
	TestUDP = "udp" // iperf3 UDP, h1 to h2: rate, loss, jitter
)

// TestLoadLatency: after the throughput search, a stream at each of
// Shares of the PDR (CSIT's latency under load: 10, 50, 90%), 1 frame in
// 64 timed; p50, p90, p99, p99.9 and max.
const TestLoadLatency = "latency-load"

// TestTable: throughput to addresses spread over a table of N learned
// ones (the restart kind runs after it).
const TestTable = "table"

// TestRestart: a stream from h1 to h2 while the DUT's daemon is restarted
// (RFC 6201's reset characterisation): frames lost per event (the
// mac-flood kind runs after it; `trestle lab` takes --events for it).
const TestRestart = "restart"

// TestMACFlood: a stream from h1 to h2 while h3 floods the bridge from
// random source addresses (the soak kind runs after it; `trestle lab`
// takes --duration and --max-entries for it).
const TestMACFlood = "mac-flood"

// TestSoak: a long stream at Load of the zero-loss rate, its figures per
// window (`trestle lab` takes --duration for it).
const TestSoak = "soak"

// TestCores is the zero-loss rate (RFC 2544 search) with the generator's
// threads on 1..N CPUs, one flow each (the cache kind runs after it).
const TestCores = "cores"

// TestIdle: what a DUT costs while it forwards nothing (the port-scale
// kind runs after it).
const TestIdle = "idle"

// TestPortScale: 64-byte throughput against the number of ports of one
// bridge (the pod-churn kind runs after it).
const TestPortScale = "port-scale"

// TestPodChurn: CNI ADDs and DELs timed on a DUT's bridge (the port-scale
// preset runs it too).
const TestPodChurn = "pod-churn"

// TestOverlay: the overlay kind's, two hosts joined by VXLAN with EVPN by
// FRR (Sites); tcp's kind runs after it.
const TestOverlay = "overlay"
