package graph

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"seckill/internal/obs"
)

// TestOperationNamed checks that both paths name the operation they serve
// by its root field, for the request metrics and span, whatever the
// client calls the operation.
func TestOperationNamed(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts Options
	}{{"fast path", Options{}}, {"gqlgen only", Options{genericOnly: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newTestEnv(t, mode.opts)
			v := e.addVoucher(t, validVoucherInput())
			user := e.token(t, 7, false)
			for _, tt := range []struct {
				name, query string
				vars        map[string]any
				want        string
			}{
				{"purchase", buyDoc, map[string]any{"voucherId": v}, "seckill"},
				{"named anything", `mutation Whatever($id: ID!) { buy: seckill(voucherId: $id) { outcome } }`, map[string]any{"id": v}, "seckill"},
				{"query", `query { vouchers { id } }`, nil, "vouchers"},
				{"two root fields", `query { vouchers { id } voucher(id: "` + v + `") { id } }`, nil, opMultiple},
				{"typename", `query { __typename }`, nil, opIntrospection},
				{"parse error", `query {`, nil, ""},
			} {
				t.Run(tt.name, func(t *testing.T) {
					body, _ := json.Marshal(map[string]any{"query": tt.query, "variables": tt.vars})
					req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+user)
					info := &obs.Request{ID: "test"}
					req = req.WithContext(obs.WithRequest(req.Context(), info))
					w := httptest.NewRecorder()
					e.handler.ServeHTTP(w, req)
					if got := info.Operation(); got != tt.want {
						t.Fatalf("operation = %q, want %q (status %d: %s)", got, tt.want, w.Code, w.Body)
					}
					if tt.want != "" && !slices.Contains(OperationLabels(), tt.want) {
						t.Fatalf("%q is not in OperationLabels() %v", tt.want, OperationLabels())
					}
				})
			}
		})
	}
}

func TestOperationLabels(t *testing.T) {
	labels := OperationLabels()
	for _, want := range []string{"seckill", "vouchers", "voucher", "order", "addSeckillVoucher", opIntrospection, opMultiple} {
		if !slices.Contains(labels, want) {
			t.Errorf("OperationLabels() = %v lacks %q", labels, want)
		}
	}
	for _, l := range labels {
		if isIntrospection(l) {
			t.Errorf("OperationLabels() has %q", l)
		}
	}
}
