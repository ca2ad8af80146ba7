// Package instance is what the switch's daemon and datapath share with the
// lab about a running instance: the network namespace's cookie that names it
// and the BPF filesystem its pins live on. It depends on no other package of
// trestle, so the lab can use it without reaching into the switch.
package instance

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// BPFFS is where the BPF filesystem is mounted.
const BPFFS = "/sys/fs/bpf"

// MountBPFFS mounts the BPF filesystem at BPFFS if it is not there, as
// systemd does at boot (a bare machine may have none), and reports whether
// it did. From a private mount namespace (ip netns exec) the mount would be
// that namespace's only: call it from the host's.
func MountBPFFS() (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err != nil {
		return false, fmt.Errorf("BPF filesystem: statfs %s: %w", BPFFS, err)
	}
	if uint32(st.Type) == unix.BPF_FS_MAGIC {
		return false, nil
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, "mode=0700"); err != nil {
		return false, fmt.Errorf("BPF filesystem: mount it at %s: %w", BPFFS, err)
	}
	return true, nil
}

// NetnsCookie is the cookie of the calling thread's network namespace.
func NetnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("netns cookie: %w", err)
	}
	defer unix.Close(fd)
	const soNetnsCookie = 71 // SO_NETNS_COOKIE, Linux 5.14
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, soNetnsCookie)
	if err != nil {
		return 0, fmt.Errorf("netns cookie (Linux 5.14 or later): %w", err)
	}
	return c, nil
}

// SafeDir checks that dir is a directory (not a link to one) that no user
// but this one owns or may write; own false allows root as its owner too
// (a parent such as /run/trestle or /sys/fs/bpf/trestle). What a daemon
// takes back from its state and pin directories (veth peers' settings,
// run-time ports, pinned maps and programs) must not be another user's to
// put there.
func SafeDir(dir string, own bool) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory: remove it, or choose another socket")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	me := uint32(os.Geteuid())
	if st.Uid != me && (own || st.Uid != 0) {
		return fmt.Errorf("owned by uid %d, not this user (uid %d): refused", st.Uid, me)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("writable by other users (mode %v): refused; chmod go-w it", fi.Mode().Perm())
	}
	return nil
}
