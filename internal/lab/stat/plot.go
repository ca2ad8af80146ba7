package stat

import (
	"bufio"
	"fmt"
	"math"
)

// symbols are ministat's plot characters: index 1..7 is a set, and a cell
// holding points of several sets shows the OR of their indexes (x and + make
// *), exactly as ministat does.
var symbols = [MaxSets + 1]byte{' ', 'x', '+', '*', '%', '#', '@', 'O'}

// plot is ministat's struct plot, driven the same way: adj for every
// extreme of every set, then add for each set, then dump. It keeps
// ministat's quirks on purpose, because the point is identical output:
//
//   - the height of the plot is the stack height of the last set added, not
//     the tallest: a later set with shorter stacks hides the top rows of an
//     earlier one, and a later taller one clears rows the earlier one wrote;
//   - without separate bars all sets share one bar line, later sets
//     overwriting the '|', 'M' and 'A' of earlier ones;
//   - a set whose stddev is NaN gets M and A but no |___| bar.
//
// Where ministat would write outside its buffers (NaN or infinite data, a
// plot one column wide) it crashes or corrupts memory; here such writes are
// dropped instead.
type plot struct {
	min, max, span float64
	width          int
	x0, dx         float64
	height         int
	data           []byte
	bars           [][]byte
	separate       bool
}

func newPlot(width int, separate bool, nsets int) *plot {
	return &plot{width: width, separate: separate, bars: make([][]byte, nsets), min: 999e99, max: -999e99}
}

func (p *plot) adj(a float64) {
	if a < p.min {
		p.min = a
	}
	if a > p.max {
		p.max = a
	}
	p.span = p.max - p.min
	p.dx = p.span / (float64(p.width) - 1.0)
	p.x0 = p.min - float64(.5*p.dx)
}

func (p *plot) dim(d *dataset) {
	p.adj(d.min())
	p.adj(d.max())
	p.adj(d.avg() - d.stddev())
	p.adj(d.avg() + d.stddev())
}

// col is the plot column of value v.
func (p *plot) col(v float64) int { return cInt((v - p.x0) / p.dx) }

// add plots set d with symbol index val (1-based).
func (p *plot) add(d *dataset, val int) {
	if p.span == 0 {
		return
	}
	bar := 0
	if p.separate {
		bar = val - 1
	}
	if p.bars[bar] == nil {
		p.bars[bar] = make([]byte, p.width)
	}

	// The tallest stack of points sharing a column gives the rows needed.
	m, i, j := 1, -1, 0
	for _, v := range d.points {
		if x := p.col(v); x == i {
			j++
			if j > m {
				m = j
			}
		} else {
			j, i = 1, x
		}
	}
	m++
	if m > p.height {
		// realloc(data, width*m), then zero the rows from the current
		// height up: this is what clears rows of an earlier, taller set.
		data := make([]byte, p.width*m)
		copy(data, p.data)
		clear(data[p.height*p.width:])
		p.data = data
	}
	p.height = m
	i = -1
	for _, v := range d.points {
		x := p.col(v)
		if x == i {
			j++
		} else {
			j, i = 1, x
		}
		if k := j*p.width + x; x != math.MinInt32 && k >= 0 && k < len(p.data) {
			p.data[k] |= byte(val)
		}
	}

	b := p.bars[bar]
	set := func(x int, c byte) {
		if x >= 0 && x < len(b) {
			b[x] = c
		}
	}
	if sd := d.stddev(); !math.IsNaN(sd) {
		x := p.col(d.avg() - sd)
		m := p.col(d.avg() + sd)
		set(m, '|')
		set(x, '|')
		for i := max(x+1, 0); i < m && i < len(b); i++ {
			if b[i] == 0 {
				b[i] = '_'
			}
		}
	}
	set(p.col(d.median()), 'M')
	set(p.col(d.avg()), 'A')
}

func (p *plot) dump(w *bufio.Writer) {
	if p.span == 0 {
		w.WriteString("[no plot, span is zero width]\n")
		return
	}
	p.frame(w)
	for i := 1; i < p.height; i++ {
		w.WriteByte('|')
		row := (p.height - i) * p.width
		for j := 0; j < p.width; j++ {
			k := 0
			if row+j < len(p.data) {
				k = int(p.data[row+j])
			}
			if k < len(symbols) {
				w.WriteByte(symbols[k])
			} else {
				fmt.Fprintf(w, "[%02x]", k)
			}
		}
		w.WriteString("|\n")
	}
	for _, b := range p.bars {
		if b == nil {
			continue
		}
		w.WriteByte('|')
		for _, c := range b {
			if c == 0 {
				c = ' '
			}
			w.WriteByte(c)
		}
		w.WriteString("|\n")
	}
	p.frame(w)
}

func (p *plot) frame(w *bufio.Writer) {
	w.WriteByte('+')
	for range p.width {
		w.WriteByte('-')
	}
	w.WriteString("+\n")
}
