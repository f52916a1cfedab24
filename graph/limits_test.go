package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/complexity"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"seckill/graph/generated"
)

// costlyDoc is a document built to make some cost calculation explode.
type costlyDoc struct {
	name string
	// build writes the document for n; the tests grow n until the
	// document fills its byte budget.
	build func(n int) string
	// introspection: the document needs introspection on to get past the
	// first check.
	introspection bool
	// cheap: the document is valid and cheap however large, and answered.
	cheap bool
}

func costlyDocs() []costlyDoc {
	repeat := func(n int, format string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, format, i)
		}
		return b.String()
	}
	// fanOut spreads fragment i-1 twice in fragment i: 2^n leaves.
	fanOut := func(op, typ, leaf, extra string) func(int) string {
		return func(n int) string {
			var b strings.Builder
			fmt.Fprintf(&b, op+" fragment F0 on %s{%s}", n, typ, leaf)
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&b, " fragment F%d on %s{%s...F%d ...F%d}", i, typ, extra, i-1, i-1)
			}
			return b.String()
		}
	}
	return []costlyDoc{
		{name: "spread fan-out", build: fanOut("query{...F%d}", "Query", "__typename", "")},
		{name: "spread fan-out with fields", build: fanOut("query{...F%d}", "Query", "__typename", "__typename a:__typename ")},
		{name: "nested spread fan-out", build: fanOut("query{vouchers{...F%d}}", "Voucher", "id", "seckill{stock} ")},
		{name: "introspection fan-out", introspection: true, build: fanOut("query{__schema{...F%d}}", "__Schema", "description", "")},
		{name: "type fan-out", introspection: true, build: fanOut(`query{__type(name:"Query"){...F%d}}`, "__Type", "name", "")},
		{name: "same field", build: func(n int) string { return "{" + strings.Repeat("__typename ", n) + "}" }},
		{name: "same object field", build: func(n int) string { return "{" + strings.Repeat("vouchers{id} ", n) + "}" }},
		{name: "same field in introspection", introspection: true, build: func(n int) string {
			return "{__schema{" + strings.Repeat("description ", n) + "}}"
		}},
		{name: "aliases", build: func(n int) string { return "{" + repeat(n, "a%d:__typename ") + "}" }},
		{name: "conflicting fields", build: func(n int) string { return "{" + repeat(n, `x:voucher(id:"%d"){id} `) + "}" }},
		{name: "conflicting fields in a fragment", build: func(n int) string {
			return "query{...F} fragment F on Query{" + repeat(n, `x:voucher(id:"%d"){id} `) + "}"
		}},
		{name: "directives", build: func(n int) string { return "{__typename" + strings.Repeat(" @include(if:true)", n) + "}" }},
		{name: "unused variables", build: func(n int) string { return "query(" + repeat(n, "$v%d:ID ") + "){__typename}" }},
		{name: "inline fragment chain", cheap: true, build: func(n int) string {
			n = min(n, 990) // the parser refuses nesting past 1000
			return "{" + strings.Repeat("...on Query{", n) + "__typename" + strings.Repeat("}", n) + "}"
		}},
		{name: "deep introspection", introspection: true, build: func(n int) string {
			n = min(n, 490)
			return `{__type(name:"Query"){` + strings.Repeat("ofType{", n) + "name" + strings.Repeat("}", n) + "}}"
		}},
		{name: "many spreads", build: func(n int) string {
			return "query{" + strings.Repeat("...F ", n) + "} fragment F on Query{__typename}"
		}},
		{name: "fragment chain", build: func(n int) string {
			return "query{...F0}" + repeat(n, " fragment F%[1]d on Query{__typename ...F%[1]d_}") // F0_ … are unknown
		}},
		{name: "fragment ladder", build: func(n int) string {
			var b strings.Builder
			fmt.Fprintf(&b, "query{...F%d} fragment F0 on Query{__typename}", n)
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&b, " fragment F%d on Query{__typename ...F%d}", i, i-1)
			}
			return b.String()
		}},
		{name: "fragment cycle", build: func(n int) string {
			return "query{" + strings.Repeat("...A ", n) + "} fragment A on Query{__typename ...B} fragment B on Query{...A}"
		}},
		{name: "long fragment cycle", build: func(n int) string {
			var b strings.Builder
			b.WriteString("query{...F0}")
			for i := range n {
				fmt.Fprintf(&b, " fragment F%d on Query{__typename ...F%d}", i, (i+1)%n)
			}
			return b.String()
		}},
		{name: "many operations", build: func(n int) string {
			return repeat(n, "query Q%d{...F} ") + "fragment F on Query{" + strings.Repeat("__typename ", 150) + "}"
		}},
	}
}

// fill returns d's document for the largest n whose document fits budget
// bytes.
func (d costlyDoc) fill(budget int) string {
	best := d.build(1)
	for n := 2; ; n = max(n+1, n*5/4) {
		q := d.build(n)
		switch {
		case len(q) > budget:
			return best
		case len(q) == len(best): // a document with a size of its own
			return q
		}
		best = q
	}
}

// writtenSelections counts the selections written in doc, without
// expanding fragments.
func writtenSelections(doc *ast.QueryDocument) int {
	var count func(ast.SelectionSet) int
	count = func(set ast.SelectionSet) int {
		n := 0
		for _, sel := range set {
			n++
			switch s := sel.(type) {
			case *ast.Field:
				n += count(s.SelectionSet)
			case *ast.InlineFragment:
				n += count(s.SelectionSet)
			}
		}
		return n
	}
	n := 0
	for _, op := range doc.Operations {
		n += count(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		n += count(f.SelectionSet)
	}
	return n
}

// TestLimitsWorkIsLinear holds the check to its promise: it visits each
// selection written in a document once, however much the document asks
// for, and it refuses every costly document.
func TestLimitsWorkIsLinear(t *testing.T) {
	l := Options{Introspection: true}.withDefaults().limits()
	for _, d := range costlyDocs() {
		t.Run(d.name, func(t *testing.T) {
			q := d.fill(DefaultMaxBodyBytes - 100)
			doc, err := parser.ParseQuery(&ast.Source{Input: q})
			if err != nil {
				t.Fatalf("%v\n%.200s", err, q)
			}
			visited, gerr := l.check(doc)
			if written := writtenSelections(doc); visited > written {
				t.Errorf("visited %d selections of %d written", visited, written)
			}
			if gerr == nil && !d.cheap && len(validator.ValidateWithRules(generated.NewExecutableSchema(generated.Config{}).Schema(), doc, validationRules(true)())) == 0 {
				t.Errorf("a valid document of %d bytes passed the limits", len(q))
			}
		})
	}
}

// TestCostlyDocumentsRefusedInTime sends every costly document, as large
// as the request limits allow, over every transport, with and without a
// token. Each must be refused before anything runs, with at most
// maxValidationErrors+1 errors, long before the deadline: the check is
// linear and validation works on what passed the limits. Without the
// limits ahead of validation, the 64 KiB fan-out would take longer than the
// age of the universe, and the field lists seconds each (tens with -race).
// TestLimitsWorkIsLinear counts the work instead of timing it.
func TestCostlyDocumentsRefusedInTime(t *testing.T) {
	const deadline = 5 * time.Second
	envs := map[bool]*testEnv{
		false: newTestEnv(t, Options{}),
		true:  newTestEnv(t, Options{Introspection: true}),
	}
	var cheap bool
	check := func(t *testing.T, how string, took time.Duration, payload []byte) {
		t.Helper()
		var resp struct {
			Data   json.RawMessage `json:"data"`
			Errors []gqlError      `json:"errors"`
		}
		if err := json.Unmarshal(payload, &resp); err != nil {
			t.Fatalf("%s: %v: %.300s", how, err, payload)
		}
		if took > deadline {
			t.Errorf("%s: answered after %v", how, took)
		}
		if cheap {
			return
		}
		if len(resp.Errors) == 0 || len(resp.Errors) > maxValidationErrors+1 {
			t.Errorf("%s: %d errors: %.300s", how, len(resp.Errors), payload)
		}
		if len(resp.Data) != 0 && string(resp.Data) != "null" {
			t.Errorf("%s: something ran: %.300s", how, payload)
		}
	}
	for _, d := range costlyDocs() {
		t.Run(d.name, func(t *testing.T) {
			cheap = d.cheap
			e := envs[d.introspection]
			admin := e.token(t, 1, true)
			q := d.fill(DefaultMaxBodyBytes - 100)
			for _, token := range []string{"", admin} {
				how := fmt.Sprintf("POST (token %t)", token != "")
				start := time.Now()
				_, _, raw := e.post(t, token, q, nil)
				check(t, how, time.Since(start), []byte(raw))

				// A URL-encoded query takes up to three bytes a byte.
				gq := d.fill(DefaultMaxBodyBytes/3 - 20)
				req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"?query="+url.QueryEscape(gq), nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				start = time.Now()
				_, _, raw = send(t, req)
				check(t, fmt.Sprintf("GET (token %t)", token != ""), time.Since(start), []byte(raw))
			}
			// A WebSocket needs a token (an anonymous one is closed at
			// connection_init).
			for _, proto := range []struct{ name, start, answer string }{
				{"graphql-transport-ws", "subscribe", "next"},
				{"graphql-ws", "start", "data"},
			} {
				c, _, err := e.dialWS(t, proto.name, nil)
				if err != nil {
					t.Fatal(err)
				}
				c.send(wsMessage{Type: "connection_init", Payload: initPayload(admin)})
				c.expect("connection_ack")
				start := time.Now()
				c.send(wsMessage{ID: "1", Type: proto.start, Payload: subscribePayload(q, nil)})
				m := c.next()
				took := time.Since(start)
				if m.Type != "error" && m.Type != proto.answer {
					t.Fatalf("%s: %s %.300s", proto.name, m.Type, m.Payload)
				}
				payload := m.Payload
				if payload[0] == '[' { // graphql-transport-ws "error": a list
					payload = []byte(`{"errors":` + string(payload) + `}`)
				}
				check(t, proto.name, took, payload)
			}
		})
	}
}

// TestComplexityAgreesWithGqlgen holds our complexity to gqlgen's
// complexity.Calculate, which it replaces, on ordinary documents.
func TestComplexityAgreesWithGqlgen(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}})
	docs := []string{
		`{ __typename }`,
		`{ vouchers { id title } }`,
		`{ vouchers(first: 5, after: "3") { id title subTitle rules payValue actualValue type seckill { stock remaining sold status beginTime endTime } } }`,
		`{ a: vouchers { id } b: vouchers { id seckill { status } } c: voucher(id: "1") { id } }`,
		`query($id: ID!) { order(id: $id) { id status createdAt } myOrders { id voucherId userId status createdAt failureReason } }`,
		`mutation { seckill(voucherId: "1") { outcome orderId message __typename } }`,
		`mutation($in: AddSeckillVoucherInput!) { addSeckillVoucher(input: $in) { id seckill { stock } } }`,
		`subscription($id: ID!) { orderStatus(orderId: $id) { orderId status at reason } }`,
		`query { ...V ...V } fragment V on Query { vouchers { ...F seckill { ...C } } } fragment F on Voucher { id title } fragment C on SeckillCampaign { stock status }`,
		`query { ... on Query { vouchers { ... on Voucher { id } ... { title } } } ...Q } fragment Q on Query { voucher(id: "2") { ...F } } fragment F on Voucher { id seckill { sold } }`,
		`query { vouchers { id @include(if: true) title @skip(if: false) } }`,
		`{ __schema { types { name fields { name } } } vouchers { id } }`,
		`{ __type(name: "Voucher") { name fields { name type { name ofType { name } } } } }`,
		introspectionQuery,
		`query A { vouchers { id } } query B { myOrders { id } }`,
	}
	for _, q := range docs {
		doc, err := parseAndValidate(es.Schema(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		vars := map[string]any{"id": "1", "in": map[string]any{}}
		for _, op := range doc.Operations {
			want := complexity.Calculate(context.Background(), es, op, vars)
			w := newCostWalker(doc)
			if got := w.selections(op.SelectionSet).complexity; got != want {
				t.Errorf("%.60s: complexity %d, gqlgen says %d", q, got, want)
			}
		}
	}
}

func parseAndValidate(schema *ast.Schema, q string) (*ast.QueryDocument, error) {
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil {
		return nil, err
	}
	if errs := validator.ValidateWithRules(schema, doc, nil); len(errs) > 0 {
		return nil, errs
	}
	return doc, nil
}

func TestLimitsRefusals(t *testing.T) {
	l := limits{complexity: 10, depth: 3, selections: 30}
	tests := []struct {
		name, query, want string
	}{
		{"within", `{ vouchers { id seckill { stock } } }`, ""},
		{"complexity", `{ a: vouchers { id title } b: vouchers { id title } c: vouchers { id title } d: vouchers { id title } }`,
			"operation has complexity 12, which exceeds the limit of 10"},
		{"complexity through fragments", `{ ...F ...F ...F } fragment F on Query { vouchers { id title payValue } }`,
			"operation has complexity 12, which exceeds the limit of 10"},
		{"unused fragment", `{ __typename } fragment F on Query { vouchers { id title payValue actualValue type rules subTitle shopId seckill { stock } } }`,
			"fragment F has complexity 11, which exceeds the limit of 10"},
		{"depth", `{ vouchers { seckill { status } } ...F } fragment F on Query { vouchers { seckill { stock } } }`, ""},
		{"depth over", `{ ...F } fragment F on Query { a { b { c { d } } } }`, "operation has depth 4, which exceeds the limit of 3"},
		{"introspection", `{ __schema { types { name } } }`, "introspection is disabled"},
		{"introspection in a fragment", `{ ...F } fragment F on Query { __type(name: "Query") { name } }`, "introspection is disabled"},
		// Each operation: 1 spread and 5 fields; the fragment: 5 fields.
		{"selections", `query A { ...F } query B { ...F } query C { ...F } query D { ...F } fragment F on Query { __typename __typename __typename __typename __typename }`,
			""},
		{"selections over", `query A { ...F } query B { ...F } query C { ...F } query D { ...F } query E { ...F } fragment F on Query { __typename __typename __typename __typename __typename }`,
			"document has 35 selections once its fragments are expanded, which exceeds the limit of 30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := parser.ParseQuery(&ast.Source{Input: tt.query})
			if err != nil {
				t.Fatal(err)
			}
			_, gerr := l.check(doc)
			switch {
			case tt.want == "" && gerr != nil:
				t.Errorf("refused: %v", gerr)
			case tt.want != "" && (gerr == nil || !strings.HasPrefix(gerr.Message, tt.want)):
				t.Errorf("got %v, want %q", gerr, tt.want)
			}
		})
	}
}

// TestSuggestionsOnlyWithIntrospection: "Did you mean …" would show the
// schema that turning introspection off hides.
func TestSuggestionsOnlyWithIntrospection(t *testing.T) {
	queries := []string{
		`{ vouchrs { id } }`,            // FieldsOnCorrectType
		`{ vouchers(frist: 1) { id } }`, // KnownArgumentNames
		`query($x: Tme) { __typename }`, // KnownTypeNames
		`{ vouchers { seckil } }`,       // FieldsOnCorrectType below
		`{ voucher(id: "1") { tpye } }`, // and once more
		`{ vouchers { seckill } }`,      // ScalarLeafs
	}
	for _, introspection := range []bool{false, true} {
		e := newTestEnv(t, Options{Introspection: introspection})
		suggested := 0
		for _, q := range queries {
			status, resp, raw := e.post(t, "", q, nil)
			if status != http.StatusOK || len(resp.Errors) == 0 {
				t.Errorf("%s: status %d: %s", q, status, raw)
			}
			if strings.Contains(raw, "Did you mean") {
				suggested++
			}
		}
		if !introspection && suggested != 0 {
			t.Errorf("introspection off: %d answers suggest names", suggested)
		}
		if introspection && suggested == 0 {
			t.Errorf("introspection on: no answer suggests a name")
		}
	}
}
