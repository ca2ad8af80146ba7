package testutil

// FuzzBytes hands out a fuzz input's bytes, and zeros once they run out, so
// that a fuzz target that builds structured values from its input (a table
// state and frames, a sequence of requests) makes one of every input.
type FuzzBytes struct {
	b []byte
	i int
}

// NewFuzzBytes reads b.
func NewFuzzBytes(b []byte) *FuzzBytes { return &FuzzBytes{b: b} }

// Byte is the next byte, 0 past the end.
func (r *FuzzBytes) Byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

// Take is the next n bytes, fewer at the end.
func (r *FuzzBytes) Take(n int) []byte {
	s := r.b[min(r.i, len(r.b)):min(r.i+n, len(r.b))]
	r.i += n
	return s
}

// Fill fills b with the next bytes, zeros past the end.
func (r *FuzzBytes) Fill(b []byte) { clear(b[copy(b, r.Take(len(b))):]) }

// Done says whether every byte has been read.
func (r *FuzzBytes) Done() bool { return r.i >= len(r.b) }
