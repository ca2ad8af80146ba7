package stat

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

const (
	// DefaultDelimiters separate columns unless told otherwise (-d).
	DefaultDelimiters = " \t"
	// StdinName is the name ministat gives standard input in its legend.
	StdinName = "<stdin>"
	// lineMax is what one fgets(buf, BUFSIZ) call reads at most: glibc's
	// BUFSIZ of 8192 less the NUL. ministat counts each such piece of a
	// longer line as a line of its own, and so do we, to report the same
	// line numbers and accept the same input.
	lineMax = 8192 - 1
)

// ReadOptions choose the field to read in each line.
type ReadOptions struct {
	// Column is the 1-based field holding the value (-C); zero means 1.
	Column int
	// Delimiters are the bytes that separate fields (-d), any run of them
	// counting as one separator, as with strtok(3); "" means
	// DefaultDelimiters.
	Delimiters string
}

// ReadFile reads the set in the file at path, named path in the report.
func ReadFile(path string, o ReadOptions) (Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return Set{}, fmt.Errorf("read data set: %w", err)
	}
	defer f.Close()
	return Read(f, path, o)
}

// Read reads a set named name from r, line by line as ministat does:
// trailing white space is dropped; fields are split on the delimiters; a
// line whose chosen field is missing, or is at or after a field starting
// with '#', is skipped; the field must be a whole C number (strtod(3): it
// may be hexadecimal, inf or nan, with leading white space). A field that is
// not a number is an error naming name:line. Fewer than MinPoints values is
// an error too.
func Read(r io.Reader, name string, o ReadOptions) (Set, error) {
	col := o.Column
	if col == 0 {
		col = 1
	}
	if col < 0 {
		return Set{}, fmt.Errorf("read %s: column %d: columns start at 1", name, col)
	}
	delim := o.Delimiters
	if delim == "" {
		delim = DefaultDelimiters
	}
	s := Set{Name: name}
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		buf, err := fgets(br)
		if len(buf) == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				return Set{}, fmt.Errorf("read %s:%d: %w", name, line, err)
			}
			break
		}
		// C string functions stop at a NUL byte.
		if i := strings.IndexByte(buf, 0); i >= 0 {
			buf = buf[:i]
		}
		for len(buf) > 0 && isCSpace(buf[len(buf)-1]) {
			buf = buf[:len(buf)-1]
		}
		tok, ok := field(buf, delim, col)
		if !ok {
			continue
		}
		v, ok := parseCDouble(tok)
		if !ok {
			return Set{}, fmt.Errorf("%s:%d: %w: %q is not a number", name, line, ErrInvalidData, tok)
		}
		s.Values = append(s.Values, v)
	}
	if len(s.Values) < MinPoints {
		return Set{}, fmt.Errorf("data set %s has %d: %w", name, len(s.Values), ErrTooFewPoints)
	}
	return s, nil
}

// fgets returns the next piece of input as fgets(buf, BUFSIZ) would: up to
// and including a newline, or lineMax bytes, whichever comes first.
func fgets(br *bufio.Reader) (string, error) {
	var b []byte
	for len(b) < lineMax {
		c, err := br.ReadByte()
		if err != nil {
			return string(b), err
		}
		b = append(b, c)
		if c == '\n' {
			break
		}
	}
	return string(b), nil
}

// field returns the col-th field of line as ministat's strtok loop finds it,
// and false when the line has no such field or a field starting with '#'
// comes first.
func field(line, delim string, col int) (string, bool) {
	isDelim := func(c byte) bool { return strings.IndexByte(delim, c) >= 0 }
	i := 0
	for n := 1; ; n++ {
		for i < len(line) && isDelim(line[i]) {
			i++
		}
		if i == len(line) {
			return "", false
		}
		start := i
		for i < len(line) && !isDelim(line[i]) {
			i++
		}
		tok := line[start:i]
		if tok[0] == '#' {
			return "", false
		}
		if n == col {
			return tok, true
		}
	}
}

// isCSpace is isspace(3) in the C locale, which ministat runs in.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseCDouble converts s as strtod(3) in the C locale does, and says
// whether the number took the whole of s, which is ministat's test of a
// valid field.
func parseCDouble(s string) (float64, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	s = s[i:]
	neg := false
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	lower := strings.ToLower(body)
	switch {
	case strings.HasPrefix(lower, "inf"):
		if lower != "inf" && lower != "infinity" {
			return 0, false
		}
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case strings.HasPrefix(lower, "nan"):
		// nan, or nan(n-char-sequence): the payload does not show in output.
		if rest := lower[3:]; rest != "" {
			if rest[0] != '(' || rest[len(rest)-1] != ')' || !isNanChars(rest[1:len(rest)-1]) {
				return 0, false
			}
		}
		if neg {
			return math.Copysign(math.NaN(), -1), true
		}
		return math.NaN(), true
	case strings.HasPrefix(lower, "0x"):
		return parseHex(lower[2:], neg)
	}
	if !isDecimal(body) {
		return 0, false
	}
	return parseRange(s)
}

// parseRange is ParseFloat that, like strtod, turns overflow into an
// infinity and underflow into zero or a subnormal rather than failing.
func parseRange(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return v, true
}

func isNanChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// isDecimal says whether s is a whole strtod decimal number without sign:
// digits with at most one point and at least one digit, then optionally an
// exponent that has digits.
func isDecimal(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

// parseHex converts the part of a C hexadecimal float after "0x", which
// strtod accepts without the binary exponent that Go insists on.
func parseHex(s string, neg bool) (float64, bool) {
	i, digits := 0, 0
	for i < len(s) && isHexDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isHexDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		// strtod reads "0x" alone as 0 and stops before the x.
		return 0, false
	}
	mant, exp := s[:i], "p0"
	if i < len(s) {
		if s[i] != 'p' {
			return 0, false
		}
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j == len(s) {
			return 0, false
		}
		for k := j; k < len(s); k++ {
			if !isDigit(s[k]) {
				return 0, false
			}
		}
		exp = s[i:]
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return parseRange(sign + "0x" + mant + exp)
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isHexDigit(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' }
