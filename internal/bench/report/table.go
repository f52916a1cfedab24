package report

import "strings"

// table aligns cells in columns: the first left, the rest right.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) write(b *strings.Builder) {
	all := append([][]string{t.header}, t.rows...)
	widths := make([]int, len(t.header))
	for _, r := range all {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range all {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("   " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

// runTable is a table with a column per run: each row is a label and one
// cell per run.
type runTable struct {
	table
	runs []*Report
}

func newRunTable(runs []*Report) *runTable {
	t := &runTable{runs: runs}
	t.header = append(t.header, "")
	for _, r := range runs {
		t.header = append(t.header, r.Label())
	}
	return t
}

// row adds label and cell(r) for each run.
func (t *runTable) row(label string, cell func(r *Report) string) {
	cells := []string{label}
	for _, r := range t.runs {
		cells = append(cells, cell(r))
	}
	t.rows = append(t.rows, cells)
}

// any reports whether some run satisfies f.
func (t *runTable) any(f func(r *Report) bool) bool {
	for _, r := range t.runs {
		if f(r) {
			return true
		}
	}
	return false
}

// persistenceRow adds a row of the runs' Persistence, "-" where a run has
// none.
func (t *runTable) persistenceRow(label string, cell func(p *Persistence) string) {
	t.row(label, func(r *Report) string {
		if r.Persistence == nil {
			return "-"
		}
		return cell(r.Persistence)
	})
}

// serverRow adds a row of the runs' ServerStats, "-" where a run has none.
func (t *runTable) serverRow(label string, cell func(s *ServerStats) string) {
	t.row(label, func(r *Report) string {
		if r.Server == nil {
			return "-"
		}
		return cell(r.Server)
	})
}
