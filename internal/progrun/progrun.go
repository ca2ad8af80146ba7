// Package progrun issues BPF_PROG_TEST_RUN directly, for the two uses that
// cilium/ebpf's wrappers do not serve: Program.Run restarts a run the kernel
// interrupted (and interrupting it is how the generator stops a long
// live-frames run), and Program.Benchmark takes no context (the switch's
// ingress interface is in the context) and returns no per-run time with one.
package progrun

import (
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Options are the inputs of one test run.
type Options struct {
	Data      []byte // the frame; required
	Context   []byte // the program's context (xdp_md, __sk_buff), optional
	Repeat    uint32 // runs in the kernel's loop (0 counts as 1)
	Flags     uint32 // e.g. unix.BPF_F_TEST_XDP_LIVE_FRAMES
	BatchSize uint32 // live frames: frames a batch
}

// Run runs the program once through BPF_PROG_TEST_RUN and returns the
// kernel's mean time a run. An interrupted run returns unix.EINTR and is
// not restarted.
func Run(progFD int, o Options) (time.Duration, error) {
	attr := struct {
		progFD, retval, dataSizeIn, dataSizeOut uint32
		dataIn, dataOut                         uint64
		repeat, duration                        uint32
		ctxSizeIn, ctxSizeOut                   uint32
		ctxIn, ctxOut                           uint64
		flags, cpu, batchSize                   uint32
		_                                       uint32
	}{
		progFD: uint32(progFD), dataSizeIn: uint32(len(o.Data)), dataIn: uint64(uintptr(unsafe.Pointer(&o.Data[0]))),
		repeat: o.Repeat, flags: o.Flags, batchSize: o.BatchSize,
	}
	if len(o.Context) > 0 {
		attr.ctxSizeIn, attr.ctxIn = uint32(len(o.Context)), uint64(uintptr(unsafe.Pointer(&o.Context[0])))
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(o.Data)
	runtime.KeepAlive(o.Context)
	if errno != 0 {
		return 0, errno
	}
	return time.Duration(attr.duration), nil
}
