#!/usr/bin/env python3
"""Write the byte fixtures of internal/frame: NAME.hex and NAME.json.

Written from the frame layout in the package doc, not from the Go code, so
that the Go tests compare Build against a second implementation. Standard
library only. Run from anywhere; it writes next to itself:

    python3 internal/frame/testdata/make_fixtures.py

NAME.hex is the frame without FCS, 16 bytes a line in lowercase hex.
NAME.json is the frame.Spec that Build is given, plus the seq and ts that
Stamp then writes (0 and 0: the frame as Build returns it).
"""

import ipaddress
import json
import os
import struct

MAGIC = 0x7452


def csum16(data):
    """RFC 1071: one's-complement sum of big-endian words, folded, inverted."""
    if len(data) % 2:
        data += b"\x00"
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(s):
    """The frame spec dict s describes, and its UDP checksum."""
    dst, src, vlan, ipv6, size, flow = s["dst"], s["src"], s["vlan"], s["ipv6"], s["size"], s["flow"]
    sport, dport = s["src_port"], s["dst_port"]
    eth = bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", ""))
    if vlan:
        eth += struct.pack("!HH", 0x8100, vlan)
    eth += struct.pack("!H", 0x86DD if ipv6 else 0x0800)
    ip_hlen = 40 if ipv6 else 20
    udp_len = size - len(eth) - ip_hlen
    payload = struct.pack("!HHIQ", MAGIC, flow, s["seq"], s["ts"])
    payload += bytes(udp_len - 8 - len(payload))
    saddr = ipaddress.ip_address(s["src_ip"]).packed
    daddr = ipaddress.ip_address(s["dst_ip"]).packed
    if ipv6:
        pseudo = saddr + daddr + struct.pack("!I3xB", udp_len, 17)
        ip = struct.pack("!IHBB", 6 << 28, udp_len, 17, 64) + saddr + daddr
    else:
        pseudo = saddr + daddr + struct.pack("!xBH", 17, udp_len)
        ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0) + saddr + daddr
        ip = ip[:10] + struct.pack("!H", csum16(ip)) + ip[12:]
    c = csum16(pseudo + struct.pack("!HHHH", sport, dport, udp_len, 0) + payload) or 0xFFFF
    udp = struct.pack("!HHHH", sport, dport, udp_len, c)
    out = eth + ip + udp + payload
    assert len(out) == size, (len(out), size)
    return out, c


BASE = dict(
    dst="02:00:00:00:00:02", src="02:00:00:00:00:01", vlan=0, ipv6=False,
    src_ip="198.18.0.1", dst_ip="198.19.0.1", src_port=1024, dst_port=9,
    size=60, flow=0, seq=0, ts=0,
)
V6 = dict(ipv6=True, src_ip="2001:2::1", dst_ip="2001:2::2")
IMIX = dict(src_ip="198.18.0.7", dst_ip="198.19.0.200", src_port=1000, dst_port=1007, flow=7)

FIXTURES = {
    "ipv4_60": dict(),
    "ipv4_vlan100_128": dict(vlan=100, size=128, flow=1),
    "ipv6_128": dict(V6, size=128, flow=2),
    "ipv6_vlan4094_1518": dict(V6, vlan=4094, size=1518, flow=3, src_port=65535, dst_port=0),
    "imix_ipv4_60": dict(IMIX, size=60),
    "imix_ipv4_590": dict(IMIX, size=590),
    "imix_ipv4_1514": dict(IMIX, size=1514),
    "ipv4_60_stamped": dict(seq=0x01020304, ts=0x1122334455667788),
    # An odd length: the checksum pads the last byte.
    "ipv6_vlan100_odd_131": dict(V6, vlan=100, size=131, flow=0xBEEF),
}


def spec(**kw):
    s = dict(BASE)
    s.update(kw)
    return s


def write(name, s):
    here = os.path.dirname(os.path.abspath(__file__))
    f, c = frame(s)
    with open(os.path.join(here, name + ".hex"), "w") as out:
        for i in range(0, len(f), 16):
            out.write(f[i:i + 16].hex() + "\n")
    with open(os.path.join(here, name + ".json"), "w") as out:
        json.dump(s, out, indent=1)
        out.write("\n")
    return c


def main():
    for name, kw in FIXTURES.items():
        write(name, spec(**kw))

    # A UDP sum of 0xffff must be sent as 0xffff, not 0 (RFC 768): pick the
    # source port that makes it so. With port 0 the frame sums to ~c0, and
    # adding the port p = c0 brings the sum to 0xffff.
    s = spec(size=64, flow=0x0ACE, src_port=0)
    _, c0 = frame(s)
    s["src_port"] = c0
    assert write("ipv4_64_csum_ffff", s) == 0xFFFF


if __name__ == "__main__":
    main()
