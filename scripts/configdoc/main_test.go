package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"testing"
)

// TestConfigurationIsCurrent fails when docs/configuration.md is not what
// the generator makes of internal/config today: a setting added, removed,
// renamed, given another default, range or comment since the file was
// written.
func TestConfigurationIsCurrent(t *testing.T) {
	want, err := render("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/configuration.md is stale: run `make generate` (go run ./scripts/configdoc) and commit it")
	}
}

// TestEverySettingIsDocumented holds the generator to the struct: each
// variable of Config is a row, with a default and a meaning.
func TestEverySettingIsDocumented(t *testing.T) {
	doc, err := render("../..")
	if err != nil {
		t.Fatal(err)
	}
	file, err := parser.ParseFile(token.NewFileSet(), "../../internal/config/config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := fields(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(settings) < 20 {
		t.Fatalf("only %d settings found in Config", len(settings))
	}
	for _, s := range settings {
		if !bytes.Contains(doc, []byte("| `"+s.env+"` | ")) {
			t.Errorf("no row for %s", s.env)
		}
	}
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("| `")) && bytes.HasSuffix(line, []byte("|  |")) {
			t.Errorf("a setting without a meaning: %s (give its field a doc comment, or a note in scripts/configdoc)", line)
		}
	}
}
