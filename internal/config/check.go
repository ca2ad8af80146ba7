package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyName is a key as a field path shows it: a bare key as it is, any
// other (empty, or with a dot or a space in it) quoted, as TOML writes it,
// so that an error about it names it.
func keyName(k string) string {
	bare := k != ""
	for _, r := range k {
		bare = bare && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}
	if bare {
		return k
	}
	return strconv.Quote(k)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// elements returns the elements of v, which should be an array of tables,
// and reports those that are not tables; callers skip them but still count
// them, so indices in messages match the file. ok is false when v is not an
// array at all.
func (c *checker) elements(v *value, field string) (elems []*value, ok bool) {
	if v.kind != unstable.Array {
		c.errorf(v.line, field, "must be an array of tables ([[%s]])", stripIndices(field))
		return nil, false
	}
	for i, e := range v.elems {
		if e.kind != unstable.Table {
			c.errorf(e.line, fmt.Sprintf("%s[%d]", field, i), "must be a table")
		}
	}
	return v.elems, true
}

func (c *checker) boolean(v *value, field string) (bool, bool) {
	if v.kind != unstable.Bool {
		c.errorf(v.line, field, "must be true or false")
		return false, false
	}
	return v.data == "true", true
}

func (c *checker) str(v *value, field string) (string, bool) {
	if v.kind != unstable.String {
		c.errorf(v.line, field, "must be a string")
		return "", false
	}
	return v.data, true
}

func (c *checker) integer(v *value, field string, lo, hi int64) (int64, bool) {
	if v.kind != unstable.Integer {
		c.errorf(v.line, field, "must be an integer")
		return 0, false
	}
	// The token is as written but valid TOML (the decoder checked it), and
	// Go's base-0 syntax covers TOML's: 1_000, 0x1f, 0o17, 0b101, +5.
	n, err := strconv.ParseInt(v.data, 0, 64)
	if err != nil || n < lo || n > hi {
		c.errorf(v.line, field, "%s is out of range %d..%d", v.data, lo, hi)
		return 0, false
	}
	return n, true
}

// stripIndices turns bridge[0].port into bridge.port, for naming the
// header a value should have been written as.
func stripIndices(field string) string {
	var b strings.Builder
	depth := 0
	for _, r := range field {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// validBridgeName allows what an interface name could be and a bpffs
// directory can safely be: bridge state is pinned under the bridge's name,
// so "." and ".." are refused too.
func validBridgeName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// ifnameProblem says why s cannot be a Linux interface name, or returns "".
// The rules are the kernel's dev_valid_name(), so a name that passes here
// can exist; whether it does is checked when the daemon attaches.
func ifnameProblem(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("longer than %d bytes", maxNameLen)
	case s == "." || s == "..":
		return "reserved name"
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == ':':
			return fmt.Sprintf("contains %q", c)
		case c == ' ' || (c >= '\t' && c <= '\r'):
			return "contains whitespace"
		case c < ' ' || c == 0x7f:
			return "contains a control character"
		}
	}
	return ""
}

// CheckListenAddr checks a TCP address to listen on: host:port with a port
// 1..65535, the host an IP address, a name, or empty for every address.
func CheckListenAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. \"127.0.0.1:9470\" or \"[::1]:9470\")", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not 1..65535", s, port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q: %q is not a host", s, host)
	}
	return nil
}
