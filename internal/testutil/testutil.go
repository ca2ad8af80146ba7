// Package testutil builds throwaway network labs for trestle's privileged
// tests: named network namespaces, veth pairs between them, commands run
// inside them, and raw Ethernet frames sent and captured on their links.
// The namespaces, veths and addresses are the shared harness's
// (internal/netnsutil, which the lab uses too); the frames are the one
// frame builder's (internal/frame).
//
// Contract:
//
//   - Everything it creates lives in namespaces it created itself. It never
//     creates, moves or changes a link in the namespace the test started in,
//     and it never sends traffic there.
//   - Every namespace is named Prefix()+"-"+<seq>+"-"+<name>, so the names of
//     one test run never collide with another run or with other tests of the
//     same run, and leftovers of a killed run are recognisable.
//   - Every resource registers a t.Cleanup when it is created, so it is
//     released when the test ends, whether it passed, failed or panicked.
//     Cleanups run last-in-first-out: processes and sockets opened inside a
//     namespace are released before the namespace itself is deleted.
//   - A namespace is only ever entered on a locked OS thread of a fresh
//     goroutine (see NS.Do); the caller's thread never changes namespace.
//
// Cleanup cannot run when the test binary is killed (SIGKILL, or the panic
// of `go test -timeout`); processes started by Start die with the binary
// (Pdeathsig), and the namespaces it left under /run/netns (with any
// datapath a daemon with persist pinned in them) are removed by the next
// test process that makes one: each records its prefix and PID under
// /run/trestle-test, and one whose PID is gone is swept, as the lab sweeps
// its killed runs.
package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// RequireRoot skips the test when the process is not root: namespaces, veth
// pairs and AF_PACKET sockets need CAP_SYS_ADMIN, CAP_NET_ADMIN and
// CAP_NET_RAW.
func RequireRoot(t testing.TB) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		t.Skipf("needs root: network namespaces, veth pairs and raw sockets require CAP_SYS_ADMIN/CAP_NET_ADMIN/CAP_NET_RAW (euid is %d)", euid)
	}
}

// RequireNetns skips the test under -short, which `make check` runs, and
// when the process is not root. Call it first in every test that makes
// network namespaces to run a daemon or send traffic through them: such
// tests belong to `make test`. (A BPF_PROG_TEST_RUN rig whose namespace
// only holds the interfaces a program redirects to is no such test: it
// calls RequireRoot and runs under make check too.)
func RequireNetns(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes network namespaces: not under -short (make check)")
	}
	RequireRoot(t)
}

// RequireCmd skips the test when one of the named programs is not in PATH.
func RequireCmd(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("needs %s in PATH: %v", name, err)
		}
	}
}

var prefix = sync.OnceValue(func() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("testutil: reading random bytes: " + err.Error())
	}
	return "tr" + hex.EncodeToString(b[:])[:5]
})

// Prefix returns a short prefix unique to this test process, "tr" followed by
// five random hex digits (7 characters). It leaves room for a suffix of up to
// 8 characters in interface names, which the kernel limits to 15.
func Prefix() string { return prefix() }
