package svg

import (
	"fmt"
	"math"
)

// Layout constants, in pixels.
const (
	pad        = 12 // canvas edge to anything drawn
	tickLen    = 5
	legendRowH = 20
	legendLine = 28 // length of a legend's line sample
)

// legendItem is one legend row: a line sample with a marker, or a bar
// swatch.
type legendItem struct {
	name string
	st   style
	bar  bool
}

// legend is the legend's placement: a column right of the plot when the
// names are short enough, else rows below the x axis label, centred. It is
// never inside the plot, so it can never hide data.
type legend struct {
	items      []legendItem
	right      bool
	cols, rows int
	colW       float64
	w, h       float64
}

func measureLegend(items []legendItem, w, h float64) legend {
	l := legend{items: items}
	n := len(items)
	if n == 0 {
		return l
	}
	itemW := 0.0
	for _, it := range items {
		itemW = max(itemW, legendLine+6+textWidth(it.name, legendSize))
	}
	if itemW <= 0.28*w && float64(n*legendRowH) <= h-150 {
		l.right, l.cols, l.rows, l.colW = true, 1, n, itemW
		l.w, l.h = itemW, float64(n*legendRowH)
		return l
	}
	l.colW = itemW + 20
	l.cols = max(1, min(n, int((w-2*pad+20)/l.colW)))
	l.rows = (n + l.cols - 1) / l.cols
	l.w = float64(l.cols)*l.colW - 20
	l.h = float64(l.rows * legendRowH)
	return l
}

// frame is the geometry shared by both chart kinds.
type frame struct {
	w, h           float64
	x0, x1, y0, y1 float64 // plot area
	xTickH         float64 // room under the axis for tick labels
	xLabel, yLabel string
	leg            legend
}

// layout places title, legend and axis labels around the plot. yAxis is
// called with the plot's height and returns the y axis; its widest label
// sets the left margin. xTickH is the height the x tick labels need.
func layout(kind string, w, h int, title, xLabel, yLabel string, items []legendItem, xTickH float64, yAxis func(y0, y1 float64) axis) (frame, axis, error) {
	f := frame{w: float64(w), h: float64(h), xTickH: xTickH, xLabel: xLabel, yLabel: yLabel}
	f.y0 = pad + 8
	if title != "" {
		f.y0 = pad + titleSize + 16
	}
	f.leg = measureLegend(items, f.w, f.h)
	bottom := tickLen + 4 + xTickH + pad
	if xLabel != "" {
		bottom += labelSize + 8
	}
	if !f.leg.right && f.leg.h > 0 {
		bottom += f.leg.h + 6
	}
	f.y1 = f.h - bottom
	if f.y1-f.y0 < minPlot {
		return f, axis{}, fmt.Errorf("%w: %s: Height %d leaves %.0f px for the plot, need %d", ErrChart, kind, h, f.y1-f.y0, minPlot)
	}
	ya := yAxis(f.y0, f.y1)
	labelW := 0.0
	for _, l := range ya.labels {
		labelW = max(labelW, textWidth(l, tickSize))
	}
	f.x0 = pad + labelW + tickLen + 5
	if yLabel != "" {
		f.x0 += labelSize + 8
	}
	f.x1 = f.w - pad - 8
	if f.leg.right {
		f.x1 = f.w - pad - f.leg.w - 18
	}
	if f.x1-f.x0 < minPlot {
		return f, axis{}, fmt.Errorf("%w: %s: Width %d leaves %.0f px for the plot, need %d", ErrChart, kind, w, f.x1-f.x0, minPlot)
	}
	return f, ya, nil
}

// drawFrame draws grid, axes, ticks and axis labels. Vertical grid lines
// are drawn only for line charts (xa.ticks of a bar chart are empty).
func (d *doc) drawFrame(f frame, xa, ya axis) {
	d.printf(`<g class="grid" stroke="%s" stroke-width="1">`+"\n", gridColor)
	for _, t := range ya.ticks {
		y := crisp(ya.px(t))
		d.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(f.x0), num(y), num(f.x1), num(y))
	}
	for _, t := range xa.ticks {
		x := crisp(xa.px(t))
		d.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(x), num(f.y0), num(x), num(f.y1))
	}
	d.printf("</g>\n")

	// A zero line, when the y range crosses zero, so the sign reads at a
	// glance.
	if !ya.log && ya.lo < 0 && ya.hi > 0 {
		y := crisp(ya.px(0))
		d.line(f.x0, y, f.x1, y, axisColor, 1, "")
	}

	x0, y1 := crisp(f.x0), crisp(f.y1)
	d.line(x0, f.y0, x0, y1, axisColor, 1, "")
	d.line(x0, y1, f.x1, y1, axisColor, 1, "")

	for i, t := range ya.ticks {
		y := crisp(ya.px(t))
		d.line(x0-tickLen, y, x0, y, axisColor, 1, "")
		d.text(x0-tickLen-4, y+tickSize*0.35, tickSize, "end", ya.labels[i], "")
	}
	for i, t := range xa.ticks {
		x := crisp(xa.px(t))
		d.line(x, y1, x, y1+tickLen, axisColor, 1, "")
		if xa.labels[i] != "" {
			d.text(x, y1+tickLen+4+tickSize*0.8, tickSize, "middle", xa.labels[i], "")
		}
	}

	if f.xLabel != "" {
		d.text((f.x0+f.x1)/2, f.y1+tickLen+4+f.xTickH+6+labelSize*0.8, labelSize, "middle", f.xLabel, "")
	}
	if f.yLabel != "" {
		x, y := pad+labelSize*0.8, (f.y0+f.y1)/2
		d.text(x, y, labelSize, "middle", f.yLabel, fmt.Sprintf(` transform="rotate(-90 %s %s)"`, num(x), num(y)))
	}
}

// clip opens a group clipped to the plot area plus a margin, so that data
// under an explicit YMin is cut off while markers on the axes stay whole.
func (d *doc) clip(f frame) {
	const m = 7
	d.printf(`<defs><clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath></defs>`+"\n",
		d.id, num(f.x0-m), num(f.y0-m), num(f.x1-f.x0+2*m), num(f.y1-f.y0+2*m))
	d.printf(`<g clip-path="url(#%s)">`+"\n", d.id)
}

func (d *doc) drawLegend(f frame) {
	l := f.leg
	if len(l.items) == 0 {
		return
	}
	var left, top float64
	if l.right {
		left, top = f.w-pad-l.w, f.y0+4
	} else {
		left, top = math.Max(pad, (f.w-l.w)/2), f.h-pad-l.h
	}
	d.printf(`<g class="legend">` + "\n")
	for i, it := range l.items {
		x := left + float64(i%l.cols)*l.colW
		y := top + float64(i/l.cols)*legendRowH + legendRowH/2 // centre line of the row
		d.printf(`<g class="legend-entry">` + "\n")
		if it.bar {
			d.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", num(x+legendLine/2-8), num(y-6), "16", "12", it.st.color)
		} else {
			dash := ""
			if it.st.dash != "" {
				dash = fmt.Sprintf(` stroke-dasharray="%s"`, it.st.dash)
			}
			d.line(x, y, x+legendLine, y, it.st.color, 2, dash)
			d.marker(it.st.marker, x+legendLine/2, y, it.st.color, "legend-marker", "")
		}
		d.text(x+legendLine+6, y+legendSize*0.35, legendSize, "start", it.name, "")
		d.printf("</g>\n")
	}
	d.printf("</g>\n")
}
