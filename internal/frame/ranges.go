package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// MaxRange is the most addresses or ports one range may hold, and the most
// flows: flow ids are 16 bits.
const MaxRange = 1 << 16

// ErrRange is wrapped by every error of ParseIPRange and ParsePortRange.
var ErrRange = errors.New("invalid range")

// IPRange is the addresses First..Last, both included, of one family. IPv4
// ranges hold 4-byte addresses.
type IPRange struct{ First, Last net.IP }

// ParseIPRange parses "ADDR" or "FIRST-LAST", IPv4 or IPv6, as given to
// --src-ip and --dst-ip. FIRST must not be above LAST, both must be of one
// family, and the range may hold at most MaxRange addresses.
func ParseIPRange(s string) (IPRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	first, err := parseIP(s, a)
	if err != nil {
		return IPRange{}, err
	}
	last := first
	if isRange {
		if last, err = parseIP(s, b); err != nil {
			return IPRange{}, err
		}
	}
	r := IPRange{First: first, Last: last}
	if err := r.check(); err != nil {
		return IPRange{}, fmt.Errorf("IP range %q: %w", s, err)
	}
	return r, nil
}

func parseIP(whole, s string) (net.IP, error) {
	ip := net.ParseIP(strings.TrimSpace(s))
	if ip == nil {
		return nil, fmt.Errorf("IP range %q: %w: %q is not an IP address", whole, ErrRange, s)
	}
	if v4 := ip.To4(); v4 != nil {
		return v4, nil
	}
	return ip, nil
}

// check says what is wrong with r: what ParseIPRange rejects, for ranges
// built by hand.
func (r IPRange) check() error {
	if r.First == nil || r.Last == nil {
		return fmt.Errorf("%w: empty", ErrRange)
	}
	if r.First.To16() == nil || r.Last.To16() == nil {
		return fmt.Errorf("%w: %v or %v is not an IP address", ErrRange, r.First, r.Last)
	}
	if (r.First.To4() == nil) != (r.Last.To4() == nil) {
		return fmt.Errorf("%w: %v and %v are of different families", ErrRange, r.First, r.Last)
	}
	hi, lo := sub128(u128(r.Last), u128(r.First))
	if hi>>63 != 0 {
		return fmt.Errorf("%w: %v is above %v", ErrRange, r.First, r.Last)
	}
	if hi != 0 || lo >= MaxRange {
		return fmt.Errorf("%w: more than %d addresses", ErrRange, MaxRange)
	}
	return nil
}

// Len is the number of addresses in r, or 0 for a range ParseIPRange would
// reject.
func (r IPRange) Len() int {
	if r.check() != nil {
		return 0
	}
	_, lo := sub128(u128(r.Last), u128(r.First))
	return int(lo) + 1
}

// At is address i mod Len of r, a new slice, 4 bytes long for IPv4. It
// panics if r is empty or i negative.
func (r IPRange) At(i int) net.IP {
	n := r.Len()
	if n == 0 || i < 0 {
		panic(fmt.Sprintf("frame: IPRange.At(%d) in %v", i, r))
	}
	a := u128(r.First)
	hi, lo := a[0], a[1]+uint64(i%n)
	if lo < a[1] {
		hi++ // carry
	}
	ip := make(net.IP, net.IPv6len)
	binary.BigEndian.PutUint64(ip[:8], hi)
	binary.BigEndian.PutUint64(ip[8:], lo)
	if r.First.To4() != nil {
		return ip.To4()
	}
	return ip
}

// String is the form ParseIPRange reads.
func (r IPRange) String() string {
	if r.First.Equal(r.Last) {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// u128 is ip in its 16-byte form as a 128-bit number. The IPv4-mapped
// prefix of IPv4 addresses cancels out in differences, and a valid range
// never carries into it.
func u128(ip net.IP) [2]uint64 {
	b := ip.To16()
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// sub128 is a-b as hi, lo.
func sub128(a, b [2]uint64) (hi, lo uint64) {
	lo = a[1] - b[1]
	hi = a[0] - b[0]
	if a[1] < b[1] {
		hi-- // borrow
	}
	return hi, lo
}

// PortRange is the UDP ports First..Last, both included.
type PortRange struct{ First, Last uint16 }

// ParsePortRange parses "PORT" or "FIRST-LAST", as given to --src-port and
// --dst-port; FIRST must not be above LAST.
func ParsePortRange(s string) (PortRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	first, err := parsePort(s, a)
	if err != nil {
		return PortRange{}, err
	}
	last := first
	if isRange {
		if last, err = parsePort(s, b); err != nil {
			return PortRange{}, err
		}
	}
	if first > last {
		return PortRange{}, fmt.Errorf("port range %q: %w: %d is above %d", s, ErrRange, first, last)
	}
	return PortRange{First: first, Last: last}, nil
}

func parsePort(whole, s string) (uint16, error) {
	p, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port range %q: %w: %q is not a port 0..65535", whole, ErrRange, s)
	}
	return uint16(p), nil
}

// Len is the number of ports in r, 0 if First is above Last.
func (r PortRange) Len() int {
	return max(int(r.Last)-int(r.First)+1, 0)
}

// At is port i mod Len of r. It panics if r is empty or i negative.
func (r PortRange) At(i int) uint16 {
	n := r.Len()
	if n == 0 || i < 0 {
		panic(fmt.Sprintf("frame: PortRange.At(%d) in %v", i, r))
	}
	return r.First + uint16(i%n)
}

// String is the form ParsePortRange reads.
func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Flows returns n specs made from base, n in 1..MaxRange. Flow i has Flow
// = i, and the i-th combination of source port, destination port, source
// IP and destination IP, counting with the source port fastest and the
// destination IP slowest, each range starting again from its first value
// when it runs out; past the product of the ranges' lengths the flows
// repeat. The specs share base's MAC slices. Every spec is checked as
// Build checks it, so Flows fails early on a bad base or a range of the
// wrong family.
func Flows(base Spec, n int, srcIPs, dstIPs IPRange, srcPorts, dstPorts PortRange) ([]Spec, error) {
	if n < 1 || n > MaxRange {
		return nil, fmt.Errorf("%w: %d flows, not in 1..%d", ErrSpec, n, MaxRange)
	}
	for _, r := range []struct {
		name string
		r    IPRange
	}{{"source IPs", srcIPs}, {"destination IPs", dstIPs}} {
		if err := r.r.check(); err != nil {
			return nil, fmt.Errorf("%w: %s %v: %w", ErrSpec, r.name, r.r, err)
		}
	}
	for _, r := range []struct {
		name string
		r    PortRange
	}{{"source ports", srcPorts}, {"destination ports", dstPorts}} {
		if r.r.Len() == 0 {
			return nil, fmt.Errorf("%w: %s %v: %w: empty", ErrSpec, r.name, r.r, ErrRange)
		}
	}

	specs := make([]Spec, n)
	nsp, ndp, nsi := srcPorts.Len(), dstPorts.Len(), srcIPs.Len()
	for i := range specs {
		s := base
		s.Flow = uint16(i)
		q := i
		s.SrcPort = srcPorts.At(q % nsp)
		q /= nsp
		s.DstPort = dstPorts.At(q % ndp)
		q /= ndp
		s.SrcIP = srcIPs.At(q % nsi)
		q /= nsi
		s.DstIP = dstIPs.At(q) // At wraps
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("flow %d: %w", i, err)
		}
		specs[i] = s
	}
	return specs, nil
}
