package views

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart geometry: paths are drawn in a viewBox of this size and stretched
// to the element's width (the strokes do not scale).
const (
	chartW = 600
	chartH = 120
	sparkW = 120
	sparkH = 26
)

// Chart is one small time-series chart drawn as inline SVG, with a value
// axis, a time axis, and a column per stretch of time whose tooltip reads
// every series' value there.
type Chart struct {
	TestID  string
	Title   string
	Note    string // e.g. "this instance"
	Unit    string // after each value: "/s", " tasks"
	From    time.Time
	To      time.Time
	Max     float64 // the top of the scale
	Lines   []Line
	YTicks  []Tick // value axis, top first
	XTicks  []Tick // time axis, oldest first
	Columns []Column
}

// Line is one series of a chart.
type Line struct {
	Name  string
	Class string // s-<name>, which colours it
	D     string // the SVG path
	Last  float64
}

// Tick is one label of an axis.
type Tick struct {
	Label string
	At    time.Time // time axis only
}

// Column is a stretch of a chart's time under the pointer: its values at
// its last sample.
type Column struct {
	X, W  string // SVG coordinates
	Title string
}

// Point is one value at one time.
type Point struct {
	At time.Time
	V  float64
}

// Series is a named list of points, oldest first.
type Series struct {
	Name   string
	Class  string
	Points []Point
}

// chartColumns is how many hover columns a chart has.
const chartColumns = 60

// NewChart scales series between from and to into paths. The scale's top is
// the largest value (at least 1), rounded up to a readable number.
func NewChart(testID, title, note, unit string, from, to time.Time, series ...Series) Chart {
	c := Chart{TestID: testID, Title: title, Note: note, Unit: unit, From: from, To: to}
	top := 1.0
	for _, s := range series {
		for _, p := range s.Points {
			top = math.Max(top, p.V)
		}
	}
	c.Max = niceCeil(top)
	c.YTicks = []Tick{{Label: rate(c.Max) + unit}, {Label: rate(c.Max / 2)}, {Label: "0"}}
	c.XTicks = []Tick{{At: from}, {At: from.Add(to.Sub(from) / 2)}, {At: to}}
	span := to.Sub(from).Seconds()
	// last[i] is, per column, the index of its last point in each series.
	last := make([][]int, chartColumns)
	for si, s := range series {
		l := Line{Name: s.Name, Class: s.Class}
		var b strings.Builder
		for i, p := range s.Points {
			if p.At.Before(from) || p.At.After(to) {
				continue
			}
			x := chartW * p.At.Sub(from).Seconds() / span
			y := chartH - chartH*0.95*p.V/c.Max
			if b.Len() == 0 {
				b.WriteString("M")
			} else {
				b.WriteString(" L")
			}
			b.WriteString(coord(x) + " " + coord(y))
			l.Last = p.V
			col := min(chartColumns-1, int(x/chartW*chartColumns))
			if last[col] == nil {
				last[col] = make([]int, len(series))
				for j := range last[col] {
					last[col][j] = -1
				}
			}
			last[col][si] = i
		}
		l.D = b.String()
		c.Lines = append(c.Lines, l)
	}
	w := float64(chartW) / chartColumns
	for col, idx := range last {
		if idx == nil {
			continue
		}
		var at time.Time
		var parts []string
		for si, i := range idx {
			if i < 0 {
				continue
			}
			p := series[si].Points[i]
			at = p.At
			parts = append(parts, series[si].Name+" "+rate(p.V)+unit)
		}
		c.Columns = append(c.Columns, Column{
			X: coord(w * float64(col)), W: coord(w),
			Title: at.UTC().Format("15:04:05 UTC") + ": " + strings.Join(parts, ", "),
		})
	}
	return c
}

// Spark is a sparkline: a line and the area under it.
type Spark struct {
	D    string
	Area string
	Last float64
	Max  float64
}

// NewSpark draws values (oldest first, one per step) into a sparkline.
func NewSpark(values []float64) Spark {
	s := Spark{Max: 1}
	if len(values) == 0 {
		return s
	}
	for _, v := range values {
		s.Max = math.Max(s.Max, v)
	}
	step := float64(sparkW)
	if len(values) > 1 {
		step = float64(sparkW) / float64(len(values)-1)
	}
	var b strings.Builder
	for i, v := range values {
		x := step * float64(i)
		if len(values) == 1 {
			x = sparkW
		}
		y := sparkH - 1 - (sparkH-2)*v/s.Max
		if i == 0 {
			b.WriteString("M")
		} else {
			b.WriteString(" L")
		}
		b.WriteString(coord(x) + " " + coord(y))
	}
	s.D = b.String()
	first := 0.0
	if len(values) == 1 {
		first = sparkW
	}
	s.Area = s.D + " L" + coord(sparkW) + " " + coord(sparkH) + " L" + coord(first) + " " + coord(sparkH) + " Z"
	s.Last = values[len(values)-1]
	return s
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func viewBox(w, h int) string { return "0 0 " + strconv.Itoa(w) + " " + strconv.Itoa(h) }

// gridY are the horizontal guide lines of a chart.
func gridY() []string {
	return []string{coord(chartH * 0.05), coord(chartH * 0.525), coord(chartH)}
}
