package seckill

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEnumListsAreComplete fails when a constant of an enum is declared in
// this package but left out of its list (enums.go, balance.go): a list the
// edges check their wire values against must hold every value.
func TestEnumListsAreComplete(t *testing.T) {
	consts := enumConsts(t, "Outcome", "OrderStatus", "PaymentStatus", "CampaignStatus", "VoucherType", "ChallengeKind", "BalanceState", "RoomState")
	checkEnumList(t, consts, "Outcome", "Outcomes", Outcomes,
		// The history's names for the answers of the layers in front of
		// admission, never a buyer's outcome (funnel.go).
		OutcomeLocalLimit, OutcomeSoldOutMark)
	checkEnumList(t, consts, "OrderStatus", "OrderStatuses", OrderStatuses)
	checkEnumList(t, consts, "PaymentStatus", "PaymentStatuses", PaymentStatuses)
	checkEnumList(t, consts, "CampaignStatus", "CampaignStatuses", CampaignStatuses)
	checkEnumList(t, consts, "VoucherType", "VoucherTypes", VoucherTypes)
	checkEnumList(t, consts, "ChallengeKind", "ChallengeKinds", ChallengeKinds)
	checkEnumList(t, consts, "BalanceState", "BalanceStates", BalanceStates)
	checkEnumList(t, consts, "RoomState", "RoomStates", RoomStates)
}

// checkEnumList compares the constants of type typ declared in the package
// (consts[typ]: value -> constant name) with list, the exported list of
// every value, and with unlisted, the constants that are deliberately
// not in it.
func checkEnumList[E ~string](t *testing.T, consts map[string]map[string]string, typ, listName string, list []E, unlisted ...E) {
	t.Helper()
	declared := consts[typ]
	if len(declared) == 0 {
		t.Errorf("no constant of type %s found: did its declaration move or change form?", typ)
	}
	seen := map[E]bool{}
	for _, v := range list {
		if seen[v] {
			t.Errorf("%s lists %q twice", listName, v)
		}
		seen[v] = true
		if slices.Contains(unlisted, v) {
			t.Errorf("%s lists %q, which the test holds as not one of its values", listName, v)
		}
	}
	for v, name := range declared {
		if !seen[E(v)] && !slices.Contains(unlisted, E(v)) {
			t.Errorf("%s (%q) is of type %s but not in %s: add it there (or, if it is not a value the API shows, to this test's exceptions, saying why)",
				name, v, typ, listName)
		}
	}
}

// enumConsts reads the package's non-test files and returns, for each of
// types, the string constants declared with that type: value -> name.
// Each must be a string literal, so that the test reads its value.
func enumConsts(t *testing.T, types ...string) map[string]map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			// A spec without type or values repeats the one before it.
			var typ string
			var values []ast.Expr
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil || len(vs.Values) > 0 {
					typ, values = "", vs.Values
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = id.Name
					} else if vs.Type == nil && len(vs.Values) > 0 {
						typ = conversionType(vs.Values[0])
					}
				}
				if !slices.Contains(types, typ) {
					continue
				}
				for i, name := range vs.Names {
					if name.Name == "_" {
						continue
					}
					v, ok := stringLiteral(values, i)
					if !ok {
						t.Errorf("%s: the %s constant %s is not a string literal; the test cannot read its value",
							fset.Position(name.Pos()), typ, name.Name)
						continue
					}
					if out[typ] == nil {
						out[typ] = map[string]string{}
					}
					out[typ][v] = name.Name
				}
			}
		}
	}
	return out
}

// conversionType returns T of a constant written T("..."), else "".
func conversionType(e ast.Expr) string {
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		if id, ok := call.Fun.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

// stringLiteral returns the value of values[i] when it is a string literal
// or a conversion of one.
func stringLiteral(values []ast.Expr, i int) (string, bool) {
	if i >= len(values) {
		return "", false
	}
	e := values[i]
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		e = call.Args[0]
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}
