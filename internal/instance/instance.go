// Package instance is what the switch's daemon and datapath share with the
// lab about a running instance: the network namespace's cookie that names it
// and the BPF filesystem its pins live on. It depends on no other package of
// trestle, so the lab can use it without reaching into the switch.
package instance

import (
	"fmt"

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
