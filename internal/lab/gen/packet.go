package gen

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
)

// runPacket sends through an AF_PACKET socket from one pinned thread, pacing
// in Go. It is the fallback for devices that cannot run live frames; it
// stamps and checksums each frame the same way the XDP program does.
func runPacket(ctx context.Context, o Options, ifindex int, specs []frame.Spec, interval time.Duration, progress func(Stats)) (Stats, error) {
	type result struct {
		s   Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		// On a thread of its own that is never unlocked: it may have
		// entered another namespace and is pinned to one CPU.
		if err := pinThread(o.CPUs[0], o.NetNS); err != nil {
			done <- result{err: err}
			return
		}
		s, err := sendPacket(ctx, o, ifindex, specs, interval, progress)
		done <- result{s, err}
	}()
	r := <-done
	return r.s, r.err
}

func sendPacket(ctx context.Context, o Options, ifindex int, specs []frame.Spec, interval time.Duration, progress func(Stats)) (Stats, error) {
	type tmpl struct {
		f   []byte
		lay frame.Layout
	}
	nsizes := len(o.Mix.Sizes)
	tmpls := make([]tmpl, 0, len(specs)*nsizes)
	for _, fs := range specs {
		for _, size := range o.Mix.Sizes {
			fs.Size = size
			f, lay, err := frame.Build(fs)
			if err != nil {
				return Stats{}, err
			}
			tmpls = append(tmpls, tmpl{f, lay})
		}
	}
	pattern := o.Mix.Pattern()
	seqs := make([]uint32, len(specs))

	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return Stats{}, fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	// Straight to the driver: the generator is not traffic to shape.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	to := &unix.SockaddrLinklayer{Ifindex: ifindex}

	var s Stats
	var gap uint64
	if o.Rate > 0 {
		gap = uint64(1e9 / o.Rate)
	}
	start := monotonicNs()
	next := start
	lastReport := start
	flow, pc := 0, 0
	for {
		if o.Count > 0 && s.Sent >= o.Count {
			break
		}
		now := monotonicNs()
		if s.Sent&1023 == 0 && ctx.Err() != nil {
			break
		}
		if gap > 0 {
			if now < next {
				if next-now > 200_000 {
					if ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(next-now) / 2)
				}
				s.Declined++
				continue
			}
			next += gap
			if next+uint64(time.Millisecond) < now {
				next = now - uint64(time.Millisecond)
			}
		}
		t := &tmpls[flow*nsizes+pattern[pc]]
		frame.Stamp(t.f, t.lay, seqs[flow], now)
		if err := unix.Sendto(fd, t.f, 0, to); err != nil {
			if err == unix.ENOBUFS || err == unix.EAGAIN {
				continue // the queue is full: try again, nothing was sent
			}
			return s, fmt.Errorf("send on ifindex %d: %w", ifindex, err)
		}
		seqs[flow]++
		s.Sent++
		s.Bytes += uint64(len(t.f))
		if flow++; flow == len(specs) {
			flow = 0
		}
		if pc++; pc == len(pattern) {
			pc = 0
		}
		if progress != nil && interval > 0 && now-lastReport >= uint64(interval) {
			lastReport = now
			s.Elapsed = time.Duration(now - start)
			progress(s)
		}
	}
	s.Elapsed = time.Duration(monotonicNs() - start)
	return s, nil
}
