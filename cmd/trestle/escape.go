package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// escaper passes text through with every control character escaped but
// tab and newline: C0 and DEL as \xNN, C1 (U+0080..U+009F) as \uNNNN, and a
// byte that is not UTF-8 as \xNN. Names in trestle's listings come from
// whoever named an interface, a tenant's veth peer among them; printed raw,
// one with an escape sequence in it would drive the operator's terminal.
type escaper struct{ w io.Writer }

func (x escaper) Write(p []byte) (int, error) {
	clean := true
	for _, c := range p {
		if c < 0x20 && c != '\t' && c != '\n' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return x.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r < 0x20 && r != '\t' && r != '\n', r == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+n]...)
		}
		i += n
	}
	if _, err := x.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plainText makes what the command prints from here on go through an
// escaper: for listings meant for a terminal (JSON escapes on its own, and
// a pcap on stdout must pass untouched).
func (e *env) plainText() { e.stdout = escaper{e.stdout} }

// escapeText is s as an escaper writes it: for a name printed where the
// whole output cannot pass through one (top's screen, whose lines end in
// "\r\n" in raw mode).
func escapeText(s string) string {
	var b strings.Builder
	_, _ = escaper{&b}.Write([]byte(s))
	return b.String()
}
