package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMECodeLayout keeps the README's code layout true: every folder
// with Go code is in its table, and every folder the table names exists.
func TestREADMECodeLayout(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Code layout\n")
	if !ok {
		t.Fatal(`README.md has no "### Code layout" section`)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	// The first cell of each table row names folders in backquotes.
	folder := regexp.MustCompile("`([^`]+)`")
	var named []string
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range folder.FindAllStringSubmatch(cells[1], -1) {
			named = append(named, m[1])
		}
	}
	if len(named) == 0 {
		t.Fatal("the code layout section names no folder")
	}
	for _, dir := range named {
		if fi, err := os.Stat(filepath.Join("../..", dir)); err != nil || !fi.IsDir() {
			t.Errorf("the code layout names %s, which is not a folder", dir)
		}
	}

	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != "../.." && (strings.HasPrefix(name, ".") || name == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		dir, _ := filepath.Rel("../..", filepath.Dir(path))
		if dir = filepath.ToSlash(dir); !slices.Contains(named, dir) {
			t.Errorf("%s has Go code but is not in the README's code layout", dir)
			named = append(named, dir) // once
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
