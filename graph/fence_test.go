package graph

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/go-cmp/cmp"
)

// serverExtensions lists, by Go type, the extensions of the gqlgen server
// inside h, read from gqlgen's unexported fields (Server.exec,
// Executor.extensions): the list a later srv.Use or srv.Around… would
// grow, wherever it is called. A gqlgen release that renames them fails
// the test that uses it, which then needs updating: a fence that fails
// closed.
func serverExtensions(t *testing.T, h *endpoint) []string {
	t.Helper()
	exec := reflect.ValueOf(h.gql).Elem().FieldByName("exec")
	if !exec.IsValid() || exec.IsNil() {
		t.Fatal("gqlgen's Server has no exec field any more: update serverExtensions")
	}
	exts := exec.Elem().FieldByName("extensions")
	if !exts.IsValid() || exts.Kind() != reflect.Slice {
		t.Fatal("gqlgen's Executor has no extensions slice any more: update serverExtensions")
	}
	var names []string
	for i := range exts.Len() {
		names = append(names, exts.Index(i).Elem().Type().String())
	}
	sort.Strings(names)
	return names
}

// TestFastPathFence fails when the gqlgen server gets an extension or
// middleware (tracing, metrics, persisted queries, another limit) that the
// purchase fast path does not declare it honours in fastPathHonours, or
// when the limits the server applies differ from the fast path's. Nearly
// every request of a sale takes the fast path: whatever it skips, the sale
// skips. Every option that adds an extension is on here.
func TestFastPathFence(t *testing.T) {
	opts := Options{
		Introspection: true,
		AroundOperations: func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
			return next(ctx)
		},
		ComplexityLimit: 17, MaxDepth: 4, MaxSelections: 99,
	}
	e := NewHandler(Domain{}, nil, opts).(*endpoint)

	var honoured []string
	for name := range fastPathHonours {
		honoured = append(honoured, name)
	}
	sort.Strings(honoured)
	if diff := cmp.Diff(honoured, serverExtensions(t, e)); diff != "" {
		t.Errorf("the gqlgen server's extensions differ from those the purchase fast path honours "+
			"(fastPathHonours in purchase.go; -honoured +server):\n%s", diff)
	}

	// The limits: the server's documentLimits and the fast path's hold
	// the same values (read by reflection: they sit behind gqlgen's
	// unexported fields).
	exts := reflect.ValueOf(e.gql).Elem().FieldByName("exec").Elem().FieldByName("extensions")
	found := false
	for i := range exts.Len() {
		ext := exts.Index(i).Elem()
		if ext.Type() != reflect.TypeFor[documentLimits]() {
			continue
		}
		found = true
		server, fast := ext.FieldByName("limits"), reflect.ValueOf(e.fast.limits)
		for j := range server.NumField() {
			if s, f := valueOf(server.Field(j)), valueOf(fast.Field(j)); s != f {
				t.Errorf("limit %s: the server applies %v, the fast path %v", server.Type().Field(j).Name, s, f)
			}
		}
	}
	if !found {
		t.Error("the server applies no documentLimits")
	}
	want := Options{Introspection: true, ComplexityLimit: 17, MaxDepth: 4, MaxSelections: 99}.limits()
	if e.fast.limits != want {
		t.Errorf("fast path limits %+v, want %+v", e.fast.limits, want)
	}
}

// valueOf reads a basic value even through unexported fields.
func valueOf(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return v.Int()
	case reflect.Bool:
		return v.Bool()
	case reflect.String:
		return v.String()
	}
	return v.Kind().String() + " (unsupported: add it to valueOf)"
}

// TestAroundOperationsCoversBothPaths: the hook for tracing and metrics
// sees the purchases the fast path answers as it sees gqlgen's operations,
// with the operation, its variables and the response.
func TestAroundOperationsCoversBothPaths(t *testing.T) {
	type seen struct {
		name, kind, voucher string
		errors              int
		data                bool
	}
	var mu sync.Mutex
	var got []seen
	var fastHits atomic.Int64
	e := newTestEnv(t, Options{
		onFastPath: func() { fastHits.Add(1) },
		AroundOperations: func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
			op := graphql.GetOperationContext(ctx)
			s := seen{name: op.Operation.Name, kind: string(op.Operation.Operation)}
			if v, ok := op.Variables["id"].(string); ok {
				s.voucher = v
			}
			handler := next(ctx)
			return func(ctx context.Context) *graphql.Response {
				resp := handler(ctx)
				if resp != nil {
					s.errors, s.data = len(resp.Errors), len(resp.Data) > 0 && string(resp.Data) != "null"
					mu.Lock()
					got = append(got, s)
					mu.Unlock()
				}
				return resp
			}
		},
	})
	voucher := e.addVoucher(t, validVoucherInput())
	mu.Lock()
	got = nil
	mu.Unlock()
	user := e.token(t, 5, false)
	const buy = `mutation Buy($id: ID!) { seckill(voucherId: $id) { outcome orderId } }`
	if _, resp, raw := e.post(t, user, buy, map[string]any{"id": voucher}); len(resp.Errors) != 0 || !strings.Contains(raw, "ACCEPTED") {
		t.Fatalf("purchase: %s", raw)
	}
	if n := fastHits.Load(); n != 1 {
		t.Fatalf("the fast path answered %d purchases, want 1", n)
	}
	if _, resp, raw := e.post(t, user, buy, map[string]any{"id": "999"}); len(resp.Errors) != 1 {
		t.Fatalf("unknown voucher: %s", raw)
	}
	e.post(t, "", `query Shop { vouchers { id } }`, nil)

	mu.Lock()
	defer mu.Unlock()
	want := []seen{
		{name: "Buy", kind: "mutation", voucher: voucher, data: true},
		{name: "Buy", kind: "mutation", voucher: "999", errors: 1},
		{name: "Shop", kind: "query", data: true},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("operations seen (-want +got):\n%s", diff)
	}
}
