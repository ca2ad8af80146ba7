package stat

import (
	"fmt"
	"math"
	"strconv"
)

// cG formats v as glibc's printf("%.*g", prec, v). strconv's 'g' with an
// explicit precision agrees with glibc digit for digit (rounding, exponent
// threshold, trailing zeros, two-digit exponents); only infinities and NaNs
// are spelled differently, and glibc prints the sign bit of a NaN.
func cG(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan"
		}
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', prec, 64)
}

// cG13 is ministat's "%13.8g".
func cG13(v float64) string { return fmt.Sprintf("%13s", cG(v, 8)) }

// cInt converts as C's (int) cast of a double does on x86-64 (cvttsd2si):
// truncation toward zero, and INT_MIN for NaN or a value out of range. The
// plot uses it for column numbers, so a NaN lands outside every row.
func cInt(f float64) int {
	if math.IsNaN(f) || f <= math.MinInt32-1.0 || f >= math.MaxInt32+1.0 {
		return math.MinInt32
	}
	return int(f)
}
