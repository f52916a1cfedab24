package graph

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"seckill/internal/seckill"
)

// TestInputCoercion sends every scalar of the schema, where it is an
// argument and where it is an input field, each wrong JSON type and the
// right ones, as variables. A wrong one is refused as the GraphQL spec's
// input coercion says: gqlparser refuses most as a request error
// (GRAPHQL_VALIDATION_FAILED, no data); what it lets through (a numeric
// string for an Int, a number for a String, a fraction for an ID, a value
// of the wrong type for Time or an enum) the scalar refuses, as
// INVALID_INPUT naming the field, with data null. Literals in a document
// are gqlparser's to check (ValuesOfCorrectType); the last cases show it.
func TestInputCoercion(t *testing.T) {
	e := newTestEnv(t, Options{})
	admin := e.token(t, 1, true)
	const (
		ok         = ""
		validation = "GRAPHQL_VALIDATION_FAILED"
		invalid    = seckill.EINVALID
	)
	// A place takes a value: an argument through a top-level variable, or
	// a field of addSeckillVoucher's input.
	type place struct {
		query string // with $v
		field string // the argument or input field
	}
	arg := func(query, field string) place { return place{query, field} }
	input := func(field string) place { return place{"", field} }
	var (
		intArg     = arg(`query($v: Int) { vouchers(first: $v) { id } }`, "first")
		stringArg  = arg(`mutation($v: String) { seckill(voucherId: "1", pass: $v) { outcome } }`, "pass")
		idArg      = arg(`query($v: ID!) { voucher(id: $v) { id } }`, "id")
		booleanArg = arg(`query($v: Boolean!) { __typename @include(if: $v) }`, "if")
	)
	tests := []struct {
		at    place
		value string // JSON
		want  string // the error's code; ok: accepted
	}{
		{intArg, `10`, ok},
		{intArg, `null`, ok},
		{intArg, `"10"`, invalid},
		{intArg, `10.5`, validation},
		{intArg, `10.0`, validation},
		{intArg, `1e1`, validation},
		{intArg, `2147483648`, invalid},
		{intArg, `true`, validation},
		{intArg, `{}`, validation},
		{intArg, `[10]`, validation},
		{input("stock"), `10`, ok},
		{input("stock"), `"10"`, invalid},
		{input("stock"), `10.5`, validation},
		{input("stock"), `10.0`, validation},
		{input("stock"), `2147483648`, invalid},
		{input("stock"), `true`, validation},
		{input("stock"), `{}`, validation},
		{input("stock"), `[10]`, validation},

		{stringArg, `"x"`, ok},
		{stringArg, `5`, invalid},
		{stringArg, `5.5`, invalid},
		{stringArg, `true`, validation},
		{stringArg, `{}`, validation},
		{stringArg, `["x"]`, validation},
		{input("title"), `"Hot pot"`, ok},
		{input("title"), `5`, invalid},
		{input("title"), `true`, validation},
		{input("title"), `{}`, validation},
		{input("title"), `["x"]`, validation},

		{idArg, `"1"`, ok},
		{idArg, `1`, ok},
		{idArg, `1.5`, invalid},
		{idArg, `1e3`, invalid},
		{idArg, `true`, validation},
		{idArg, `{}`, validation},
		{idArg, `null`, validation},
		{input("shopId"), `"7"`, ok},
		{input("shopId"), `7`, ok},
		{input("shopId"), `7.5`, invalid},
		{input("shopId"), `true`, validation},
		{input("shopId"), `{}`, validation},

		{booleanArg, `true`, ok},
		{booleanArg, `"true"`, validation},
		{booleanArg, `1`, validation},
		{booleanArg, `null`, validation},

		{input("beginTime"), `5`, invalid}, // Time, a custom scalar
		{input("beginTime"), `true`, invalid},
		{input("beginTime"), `{}`, invalid},
		{input("challenge"), `"NONE"`, ok},         // ChallengeKind, an enum
		{input("challenge"), `"none"`, validation}, // exactEnums
		{input("challenge"), `"FOO"`, validation},
		{input("challenge"), `1`, validation},
		{input("challenge"), `true`, validation},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s=%s", tc.at.field, tc.value), func(t *testing.T) {
			query, vars := tc.at.query, map[string]any{"v": json.RawMessage(tc.value)}
			if query == "" {
				in := validVoucherInput()
				in[tc.at.field] = json.RawMessage(tc.value)
				query, vars = addVoucherMutation, map[string]any{"input": in}
			}
			status, resp, raw := e.post(t, admin, query, vars)
			var data map[string]json.RawMessage
			_ = json.Unmarshal([]byte(raw), &data)
			_, hasData := data["data"]
			switch tc.want {
			case ok:
				for _, err := range resp.Errors {
					if err.code() == validation || err.field() == tc.at.field && err.code() == invalid {
						t.Fatalf("refused: %s", raw)
					}
				}
			case validation:
				err := onlyError(t, resp, raw)
				if status != http.StatusOK || err.code() != validation || hasData {
					t.Errorf("status %d; want 200, %s and no data: %s", status, validation, raw)
				}
			case invalid:
				err := onlyError(t, resp, raw)
				if status != http.StatusOK || err.code() != invalid || err.field() != tc.at.field || !hasData {
					t.Errorf("status %d; want 200, %s on %s, and data: %s", status, invalid, tc.at.field, raw)
				}
			}
		})
	}

	// Literals: gqlparser checks them against the argument's type, but
	// for an Int's range, which the scalar checks.
	status, resp, raw := e.post(t, admin, `{ vouchers(first: 2147483648) { id } }`, nil)
	if err := onlyError(t, resp, raw); status != http.StatusOK || err.code() != invalid || err.field() != "first" {
		t.Errorf("first: 2147483648: status %d: %s", status, raw)
	}
	for _, q := range []string{
		`{ vouchers(first: "10") { id } }`,
		`{ vouchers(first: 10.0) { id } }`,
		`mutation { addSeckillVoucher(input: {shopId: "7", title: "x", payValue: 1, actualValue: 1, stock: "1",
			beginTime: "2026-01-01T00:00:00Z", endTime: "2036-01-01T00:00:00Z"}) { id } }`,
		`{ voucher(id: 1.5) { id } }`,
		`{ voucher(id: true) { id } }`,
		`mutation { seckill(voucherId: "1", pass: 5) { outcome } }`,
		`{ __typename @include(if: "true") }`,
	} {
		status, resp, raw := e.post(t, admin, q, nil)
		if len(resp.Errors) == 0 || resp.Errors[0].code() != validation || status != http.StatusOK {
			t.Errorf("%s: status %d: %s", q, status, raw)
		}
	}
	if n := e.store.count(); n != 5 { // the accepted inputs: stock 10, title, shopId "7" and 7, challenge
		t.Errorf("%d vouchers, want 5 (one per accepted input)", n)
	}
}
