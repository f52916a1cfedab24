package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportsFollowTheLayout keeps the README's dependency rule true
// ("Code layout": the edges and adapters import internal/seckill and never
// each other; the domain imports only the standard library and
// golang.org/x), on every package's imports as `go list` reports them,
// its tests' included. The roles (roleOf) and what each may import
// (importRule) are:
//
//   - domain, internal/seckill: the standard library and golang.org/x only;
//     its tests also its test doubles and the test libraries (go-cmp, rapid).
//   - test doubles, internal/seckill/seckilltest: the domain too, no more.
//   - edges (graph..., web..., jobs, internal/payhook, internal/eventhook, salepage) and adapters
//     (internal/store..., internal/admission): the domain, their own
//     folder's packages, the shared libraries, third-party modules; never
//     another edge or adapter, the wiring, the bench or the test doubles.
//   - shared libraries (internal/auth and its test identity provider
//     internal/auth/idp, batch, cli, clientaddr, config,
//     gqlclient, obs, sampler, signature, testenv; lua, migrations, playground): the
//     domain, other libraries, third-party modules, so that no edge or
//     adapter reaches another through one; internal/batch the standard
//     library only, as the README says.
//   - the bench, internal/bench... (seckill-bench's engine): anything but
//     the wiring: an operator tool never wires the server a second time.
//   - wiring, internal/app, cmd/... and scripts/... (the Makefile's programs): anything.
//
// A package's tests may import what the package may, and also: itself (an
// external test package), the adapters and the test doubles (tests run
// against real Postgres and Redis: graph's tests drive the real stores,
// migrations' tests run through the store), internal/testenv (a library
// anyway); the bench's tests also the wiring (they start a server). Never
// another edge.
func TestImportsFollowTheLayout(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		r, ok := roleOf(p.rel)
		if !ok {
			t.Errorf("%s has no role in TestImportsFollowTheLayout: add it to roleOf (domain, edge, adapter, library, bench or wiring)", p.ImportPath)
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				if why := importRule(p, r, imp, test); why != "" {
					where := ""
					if test {
						where = " in its tests"
					}
					t.Errorf("%s (%s) imports %s%s: %s", p.ImportPath, r.kind, imp, where, why)
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
}

// TestImportRule keeps the rule from passing everything: each import the
// README forbids is refused, and each one it allows is let through.
func TestImportRule(t *testing.T) {
	for _, tc := range []struct {
		from, imp string
		test      bool
		want      string
	}{
		{"web", "seckill/internal/store", false, inwardOnly},
		{"internal/store", "seckill/jobs", false, inwardOnly},
		{"internal/admission", "seckill/internal/store", false, inwardOnly},
		{"graph", "seckill/web/views", false, inwardOnly},
		{"graph", "seckill/web", true, inwardOnly},
		{"graph", "seckill/internal/store", true, ""},
		{"graph", "seckill/graph/model", false, ""},
		{"web/views", "seckill/internal/seckill", false, ""},
		{"jobs", "seckill/internal/seckill/seckilltest", false, doublesInTest},
		{"internal/seckill", "github.com/uptrace/bun", false, domainOnlyStd},
		{"internal/seckill", "seckill/internal/obs", false, domainOnlyStd},
		{"internal/seckill", "golang.org/x/sync/errgroup", false, ""},
		{"internal/seckill", "github.com/google/go-cmp/cmp", false, domainOnlyStd},
		{"internal/seckill", "github.com/google/go-cmp/cmp", true, ""},
		{"internal/seckill/seckilltest", "seckill/internal/store", false, doublesOnly},
		{"internal/sampler", "seckill/internal/admission", false, libraryInward},
		{"internal/batch", "golang.org/x/sync/errgroup", false, batchOnlyStd},
		{"internal/batch", "seckill/internal/testenv", true, ""},
		{"web", "seckill/internal/app", false, wiringOnly},
		{"internal/store", "seckill/internal/bench/load", false, benchOnly},
		{"internal/bench/verify", "seckill/internal/app", false, toolNoWiring},
		{"internal/bench", "seckill/internal/app", true, ""},
		{"internal/bench", "seckill/internal/payhook", false, ""},
		{"internal/app", "seckill/web", false, ""},
		{"web", "seckill/internal/nowhere", false, "it has no role in TestImportsFollowTheLayout"},
	} {
		r, ok := roleOf(tc.from)
		if !ok {
			t.Fatalf("%s has no role", tc.from)
		}
		p := listedPackage{ImportPath: "seckill/" + tc.from, module: "seckill", rel: tc.from}
		if got := importRule(p, r, tc.imp, tc.test); got != tc.want {
			t.Errorf("%s importing %s (test %v): %q, want %q", tc.from, tc.imp, tc.test, got, tc.want)
		}
	}
}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Module       *struct{ Path string }
	Error        *struct{ Err string }

	module string // the main module's path
	rel    string // ImportPath inside the module: "web/views"
}

// listPackages runs `go list` on the module.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	cmd := exec.Command(goCmd, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Module,Error", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Module == nil {
			t.Fatalf("go list %s: no module", p.ImportPath)
		}
		p.module = p.Module.Path
		p.rel = strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, p.module), "/")
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// role is what a package is in the layout: its kind, and the unit (the
// folder) whose packages may import each other freely.
type role struct {
	kind string // domain, doubles, edge, adapter, library, bench, wiring
	unit string
}

// roleOf places a package (its path inside the module) in the layout.
func roleOf(rel string) (role, bool) {
	under := func(dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }
	switch {
	case rel == "internal/seckill":
		return role{"domain", rel}, true
	case rel == "internal/seckill/seckilltest":
		return role{"doubles", rel}, true
	case under("graph"):
		return role{"edge", "graph"}, true
	case under("web"):
		return role{"edge", "web"}, true
	case rel == "jobs", rel == "internal/payhook", rel == "internal/stripepay", rel == "internal/eventhook", rel == "salepage":
		return role{"edge", rel}, true
	case under("internal/store"):
		return role{"adapter", "internal/store"}, true
	case rel == "internal/admission":
		return role{"adapter", rel}, true
	case under("internal/bench"):
		return role{"bench", "internal/bench"}, true
	case rel == "internal/app", under("cmd"), under("scripts"): // scripts: the Makefile's own programs
		return role{"wiring", rel}, true
	case slices.Contains(libraries, rel):
		return role{"library", rel}, true
	}
	return role{}, false
}

// libraries are the shared helpers of the README's code layout.
var libraries = []string{
	"internal/auth", "internal/auth/idp", "internal/batch", "internal/cli", "internal/clientaddr", "internal/config",
	"internal/gqlclient", "internal/obs", "internal/sampler", "internal/signature", "internal/testenv",
	"lua", "migrations", "playground",
}

// testLibraries are the third-party modules the domain's tests may use.
var testLibraries = []string{"github.com/google/go-cmp", "pgregory.net/rapid"}

// Why an import breaks the rule.
const (
	domainOnlyStd = "the domain imports only the standard library and golang.org/x (README, Code layout)"
	doublesOnly   = "the domain's test doubles import only the domain, the standard library and golang.org/x"
	batchOnlyStd  = "internal/batch is standard library only (README, Code layout)"
	inwardOnly    = "edges and adapters never import each other (README, Code layout: dependencies point inward)"
	libraryInward = "a shared library imports no edge or adapter: through it, one would reach another"
	doublesInTest = "the test doubles are for tests"
	wiringOnly    = "only the commands import the wiring, internal/app (README, Code layout)"
	toolNoWiring  = "an operator tool never wires the server a second time (STYLE.md): it is a program of its own"
	benchOnly     = "only seckill-bench (cmd/seckill-bench) imports the bench"
)

// importRule says why p, in role r, may not import imp (in its tests when
// test is set); "" when it may.
func importRule(p listedPackage, r role, imp string, test bool) string {
	if imp == p.ImportPath {
		return "" // an external test package
	}
	if imp != p.module && !strings.HasPrefix(imp, p.module+"/") {
		first, _, _ := strings.Cut(imp, "/")
		switch {
		case !strings.Contains(first, "."):
			return "" // the standard library
		case r.kind == "domain" || r.kind == "doubles":
			if first == "golang.org" && strings.HasPrefix(imp, "golang.org/x/") || test && slices.ContainsFunc(testLibraries, func(l string) bool {
				return imp == l || strings.HasPrefix(imp, l+"/")
			}) {
				return ""
			}
			return domainOnlyStd
		case p.rel == "internal/batch" && !test:
			return batchOnlyStd
		}
		return "" // third-party modules, outside the domain
	}
	to, ok := roleOf(strings.TrimPrefix(strings.TrimPrefix(imp, p.module), "/"))
	switch {
	case !ok:
		return "it has no role in TestImportsFollowTheLayout"
	case p.rel == "internal/batch" && !test:
		return batchOnlyStd
	case to.unit == r.unit:
		return "" // one folder's packages: an edge's views, the store's test database
	}
	switch r.kind {
	case "wiring":
		return ""
	case "domain":
		if test && to.kind == "doubles" {
			return ""
		}
		return domainOnlyStd
	case "doubles":
		if to.kind == "domain" {
			return ""
		}
		return doublesOnly
	case "bench":
		if to.kind == "wiring" && !test {
			return toolNoWiring
		}
		return "" // it drives the server from outside: the stores to verify, the webhook's signer
	}
	// An edge, an adapter or a shared library.
	switch to.kind {
	case "domain", "library":
		return ""
	case "wiring":
		return wiringOnly
	case "bench":
		return benchOnly
	case "adapter", "doubles":
		if test {
			return "" // tests run against the real stores, or their doubles
		}
		if to.kind == "doubles" {
			return doublesInTest
		}
	}
	if r.kind == "library" {
		return libraryInward
	}
	return inwardOnly
}
