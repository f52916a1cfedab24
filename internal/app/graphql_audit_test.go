package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestGraphQLOverHTTPAudit runs graphql-http's GraphQL-over-HTTP audit
// (graph/audit/audit.mjs) against the endpoint of a development and of a
// production server: no MUST failure and no SHOULD warning, but for the
// audits that ask for introspection, which production turns off. Without
// Node.js or the audit's packages the test fails in CI (make test installs
// them: make graph-audit) and is skipped elsewhere.
func TestGraphQLOverHTTPAudit(t *testing.T) {
	node, script := graphAudit(t)
	for _, prod := range []bool{false, true} {
		name := map[bool]string{false: "dev", true: "prod"}[prod]
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, "", func(m map[string]string) {
				if prod {
					m["SECKILL_ENV"] = "prod"
					m["SECKILL_JWT_SECRET"] = "graph-audit-secret-of-this-test-only-0123456789"
				}
			})
			if e.app.Config.Dev() == prod {
				t.Fatalf("SECKILL_ENV is %q", e.app.Config.Env)
			}
			args := []string{script, e.url + "/graphql"}
			if prod {
				args = []string{script, "--prod", e.url + "/graphql"}
			}
			ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, node, args...).CombinedOutput()
			t.Logf("node %v:\n%s", args, out)
			if err != nil {
				t.Fatalf("the audit failed (%v): see its lines above", err)
			}
		})
	}
}

// graphAudit finds node and the audit script with its packages installed.
func graphAudit(t *testing.T) (node, script string) {
	t.Helper()
	skip := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatal(why + " (make test installs it)")
		}
		t.Skip(why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is missing: install Node.js 20 to run the GraphQL-over-HTTP audit")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "graph", "audit"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphql-http", "package.json")); err != nil {
		skip("graph/audit's packages are not installed: make graph-audit")
	}
	return node, filepath.Join(dir, "audit.mjs")
}
