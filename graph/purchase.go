package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"seckill/graph/model"
	"seckill/internal/obs"
)

// The purchase fast path.
//
// Nearly every request a flash sale receives is the same document: the
// seckill mutation with a voucher id and two or three result fields, and
// gqlgen's generic executor around that one resolver (operation context,
// extensions, field context, response assembly) costs the server more than
// the Redis round trip itself.
// purchasePath answers that document directly: it recognises it once per
// query string, with gqlparser's full validation against our schema, and
// from then on decodes the request, calls the same resolver and writes the
// same bytes gqlgen would (the same marshalers, error presenter, recover
// function and response encoding). Anything else, or anything it is not
// sure of, goes to gqlgen untouched: nothing has run by then, so falling
// back is always safe. TestPurchaseFastPathAgrees sends a corpus of
// requests through both paths and compares status, headers and bytes.

// maxPlannedQuery bounds the documents the fast path looks at: a purchase
// is well under 200 bytes, and anything longer is left to gqlgen rather
// than parsed twice.
const maxPlannedQuery = 1024

// purchasePlan is what a recognised document asks for. A nil *purchasePlan
// in the cache means "not a plain purchase: use gqlgen".
type purchasePlan struct {
	op       *ast.OperationDefinition
	opName   string // the operation's name, "" when anonymous
	key      string // the response key of the seckill field (its alias)
	field    *ast.Field
	variable string // the variable holding voucherId, or "" when literal
	literal  string // voucherId written in the document
	fields   []resultField
}

// resultField is one selected field of SeckillResult, in document order.
type resultField struct {
	key  string // response key
	name string // outcome, orderId, message, retryAfter or __typename
}

type purchasePath struct {
	resolve func(ctx context.Context, voucherID string) (*model.SeckillResult, error)
	schema  *ast.Schema
	plans   *lru.LRU[*purchasePlan]
	present graphql.ErrorPresenterFunc
	recover graphql.RecoverFunc
	limits  limits              // the limits the gqlgen server applies
	rules   func() *rules.Rules // and its validation rules
	around  graphql.OperationMiddleware
	next    http.Handler
	onServe func() // tests: called when the fast path answers
}

// fastPathHonours names, by Go type, every extension of the gqlgen server
// (NewHandler installs them) with how the fast path gives a purchase the
// same effect. TestFastPathFence compares it with the server's extensions:
// an extension added there and not here fails it, because the fast path
// would silently skip it for nearly every request.
var fastPathHonours = map[string]string{
	"graph.documentLimits":    "recognise applies the same limits (Options.limits) and validation rules",
	"extension.Introspection": "a purchase asks for no introspection",
	"executor.aroundOpFunc":   "Options.AroundOperations: execute calls it around the purchase",
	"graph.operationNamer":    `ServeHTTP names the operation "seckill" for obs (its label by root field)`,
	"graph.exactEnums":        "a purchase's only variable is an ID",
}

func newPurchasePath(es graphql.ExecutableSchema, r *Resolver, opts Options, next http.Handler) *purchasePath {
	return &purchasePath{
		resolve: func(ctx context.Context, voucherID string) (*model.SeckillResult, error) {
			return r.Mutation().Seckill(ctx, voucherID, nil, nil) // a plain purchase has no answer and no pass
		},
		schema:  es.Schema(),
		plans:   lru.New[*purchasePlan](1000),
		present: presentError(opts.Logger),
		recover: recoverFunc(opts.Logger),
		limits:  opts.limits(),
		rules:   validationRules(opts.Introspection),
		around:  opts.AroundOperations,
		next:    next,
		onServe: opts.onFastPath,
	}
}

// purchaseRequest is the body of a GraphQL POST, decoded like gqlgen's
// RawParams except that variables stay raw until the plan says which one
// it needs.
type purchaseRequest struct {
	Query         string                     `json:"query"`
	OperationName string                     `json:"operationName"`
	Variables     map[string]json.RawMessage `json:"variables"`
	Extensions    json.RawMessage            `json:"extensions"`
}

func (p *purchasePath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.supports(r) {
		p.next.ServeHTTP(w, r)
		return
	}
	body, err := readBody(r)
	if err != nil {
		// Not read whole: gqlgen reads the same bytes, then the rest of
		// the body or the same error, and answers its way.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		p.next.ServeHTTP(w, r)
		return
	}
	var req purchaseRequest
	plan, voucherID, ok := (*purchasePlan)(nil), "", decodePurchaseRequest(body, &req) == nil
	if ok {
		plan = p.plan(r.Context(), req.Query)
		voucherID, ok = plan.voucherID(&req)
	}
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.next.ServeHTTP(w, r)
		return
	}
	if p.onServe != nil {
		p.onServe()
	}
	obs.SetOperation(r.Context(), "seckill")
	w.Header()["Content-Type"] = jsonContentType // as Set would, without a slice per request
	_, _ = w.Write(p.execute(r.Context(), plan, &req, voucherID))
}

// jsonContentType is the value of every fast answer's Content-Type header.
// net/http only reads it; no handler after the fast path's writes it.
var jsonContentType = []string{"application/json"}

// supports accepts what gqlgen's POST transport accepts and answers with
// application/json; the rest (other Accept types, GET, WebSocket) is
// gqlgen's.
func (p *purchasePath) supports(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != "" {
		return false
	}
	// What buyers send is parsed at once; anything else as gqlgen would.
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return false
		}
	}
	switch r.Header.Get("Accept") {
	case "", "application/json", "*/*", "application/json, */*":
		return true
	}
	return false
}

// readBody reads the whole body; net/http (and limitBody) end it at
// Content-Length, so a known length is read into a buffer of that size.
// An error means the body was not read whole: what was read is returned
// with it, and the rest (if any) is still in r.Body.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	buf := make([]byte, r.ContentLength)
	n, err := io.ReadFull(r.Body, buf)
	if err == nil {
		var one [1]byte
		if m, _ := r.Body.Read(one[:]); m > 0 {
			// More than announced (a wrapped body can do that): let gqlgen
			// read it all.
			return append(buf[:n], one[:m]...), errLongBody
		}
	}
	return buf[:n], err
}

var errLongBody = errors.New("request body longer than its Content-Length")

// plan returns the plan of query, recognising it the first time it is
// seen; nil means gqlgen answers it.
func (p *purchasePath) plan(ctx context.Context, query string) *purchasePlan {
	if len(query) > maxPlannedQuery || !strings.Contains(query, "seckill") {
		return nil
	}
	if plan, ok := p.plans.Get(ctx, query); ok {
		return plan
	}
	plan := p.recognise(query)
	p.plans.Add(ctx, query, plan)
	return plan
}

// recognise returns a plan when query is a valid document with exactly
// one operation, a mutation that selects only seckill(voucherId: $var or
// "literal") with plain scalar fields, and no fragments or directives
// anywhere, within the server's limits; nil otherwise. The shape is
// checked first, so only purchases are ever validated here.
func (p *purchasePath) recognise(query string) *purchasePlan {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil || len(doc.Operations) != 1 || len(doc.Fragments) != 0 {
		return nil
	}
	op := doc.Operations[0]
	if op.Operation != ast.Mutation || len(op.Directives) != 0 || len(op.SelectionSet) != 1 {
		return nil
	}
	f, ok := op.SelectionSet[0].(*ast.Field)
	if !ok || f.Name != "seckill" || len(f.Directives) != 0 || len(f.Arguments) != 1 || f.Arguments[0].Name != "voucherId" {
		return nil
	}
	plan := &purchasePlan{op: op, opName: op.Name, key: f.Alias, field: f}
	switch v := f.Arguments[0].Value; v.Kind {
	case ast.Variable:
		if len(op.VariableDefinitions) != 1 {
			return nil
		}
		def := op.VariableDefinitions[0]
		if def.Variable != v.Raw || def.DefaultValue != nil || len(def.Directives) != 0 ||
			def.Type.NamedType != "ID" || !def.Type.NonNull {
			return nil
		}
		plan.variable = v.Raw
	case ast.StringValue:
		if len(op.VariableDefinitions) != 0 {
			return nil
		}
		plan.literal = v.Raw
	default:
		return nil
	}
	seen := map[string]bool{}
	for _, sel := range f.SelectionSet {
		sf, ok := sel.(*ast.Field)
		if !ok || len(sf.Directives) != 0 || len(sf.Arguments) != 0 || seen[sf.Alias] {
			return nil
		}
		switch sf.Name {
		case "outcome", "orderId", "message", "retryAfter", "__typename":
		default:
			return nil
		}
		seen[sf.Alias] = true
		plan.fields = append(plan.fields, resultField{key: sf.Alias, name: sf.Name})
	}
	// Leave refusals to gqlgen: the same limits, the same rules.
	if len(plan.fields) == 0 {
		return nil
	}
	if _, err := p.limits.check(doc); err != nil {
		return nil
	}
	if errs := validator.ValidateWithRules(p.schema, doc, p.rules()); len(errs) > 0 {
		return nil
	}
	return plan
}

// voucherID reads the voucherId argument of req, or reports that gqlgen
// should answer the request: a different operation name, extensions
// (persisted queries), variables other than the one planned, or a value
// that is not a JSON string.
func (plan *purchasePlan) voucherID(req *purchaseRequest) (string, bool) {
	if plan == nil || len(req.Extensions) != 0 && string(req.Extensions) != "null" {
		return "", false
	}
	if req.OperationName != "" && req.OperationName != plan.opName {
		return "", false
	}
	if plan.variable == "" {
		return plan.literal, len(req.Variables) == 0
	}
	raw, ok := req.Variables[plan.variable]
	if !ok || len(req.Variables) != 1 || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if id, ok := plainJSONString(raw); ok {
		return id, true
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return "", false
	}
	return id, true
}

// plainJSONString returns the string the JSON string token raw holds when
// it is plain (printable ASCII, no escape): what json.Unmarshal would
// return for it, without decoding. Buyers' voucher ids are plain.
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// execute runs the resolver and encodes the response as gqlgen's POST
// transport does: a resolver error or panic becomes one presented error on
// the field's path and, the field being non-null, "data": null. An
// Options.AroundOperations middleware wraps it as gqlgen's executor would.
func (p *purchasePath) execute(ctx context.Context, plan *purchasePlan, req *purchaseRequest, voucherID string) []byte {
	if p.around == nil {
		return encodeResponse(p.respond(ctx, plan, voucherID))
	}
	opCtx := &graphql.OperationContext{
		RawQuery:      req.Query,
		OperationName: req.OperationName, // as gqlgen: the request's
		Operation:     plan.op,
		RecoverFunc:   p.recover,
		Stats:         graphql.Stats{OperationStart: graphql.Now()},
	}
	if plan.variable != "" {
		opCtx.Variables = map[string]any{plan.variable: voucherID}
	}
	ctx = graphql.WithOperationContext(ctx, opCtx)
	handler := p.around(ctx, func(ctx context.Context) graphql.ResponseHandler {
		done := false
		return func(ctx context.Context) *graphql.Response {
			if done {
				return nil
			}
			done = true
			resp := p.respond(ctx, plan, voucherID)
			return &resp
		}
	})
	resp := handler(ctx)
	if resp == nil {
		return []byte("null") // what gqlgen's POST transport writes
	}
	return encodeResponse(*resp)
}

func (p *purchasePath) respond(ctx context.Context, plan *purchasePlan, voucherID string) graphql.Response {
	res, err, panicked := p.call(ctx, voucherID)
	var resp graphql.Response
	if res == nil {
		resp.Errors = p.fieldErrors(ctx, plan, err, panicked)
	} else {
		resp.Data = plan.marshal(res)
	}
	return resp
}

func encodeResponse(resp graphql.Response) []byte {
	if resp.Errors == nil && resp.Extensions == nil && !needsEscaping(resp.Data) {
		// What json.Marshal would write: the data is already compact and
		// has nothing it escapes further.
		b := make([]byte, 0, len(resp.Data)+len(`{"data":}`))
		b = append(b, `{"data":`...)
		b = append(b, resp.Data...)
		return append(b, '}')
	}
	b, err := json.Marshal(&resp)
	if err != nil {
		panic("graph: marshal a purchase response: " + err.Error())
	}
	return b
}

// needsEscaping reports whether json.Marshal would rewrite any byte of
// the compact JSON b: it escapes <, > and & for HTML, and U+2028 and
// U+2029 (which start with 0xE2 in UTF-8).
func needsEscaping(b []byte) bool {
	return bytes.ContainsAny(b, "<>&") || bytes.IndexByte(b, 0xE2) >= 0
}

func (p *purchasePath) call(ctx context.Context, voucherID string) (res *model.SeckillResult, err error, panicked any) {
	defer func() {
		if v := recover(); v != nil {
			panicked = v
		}
	}()
	res, err = p.resolve(ctx, voucherID)
	if err != nil {
		res = nil
	}
	return res, err, nil
}

// fieldErrors presents a resolver error, a recovered panic or a missing
// result through gqlgen's own error functions, in a context that carries
// the operation and the field as gqlgen's executor would.
func (p *purchasePath) fieldErrors(ctx context.Context, plan *purchasePlan, err error, panicked any) gqlerror.List {
	ctx = graphql.WithOperationContext(ctx, &graphql.OperationContext{
		OperationName: plan.opName,
		RecoverFunc:   p.recover,
	})
	ctx = graphql.WithResponseContext(ctx, p.present, p.recover)
	ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{
		Object:     "Mutation",
		Field:      graphql.CollectedField{Field: plan.field},
		IsMethod:   true,
		IsResolver: true,
	})
	switch {
	case panicked != nil:
		graphql.AddError(ctx, graphql.Recover(ctx, panicked))
	case err != nil:
		graphql.AddError(ctx, graphql.AddFieldLocationToError(ctx, err))
	default:
		graphql.AddInvalidNullError(ctx, "SeckillResult!")
	}
	return graphql.GetErrors(ctx)
}

// marshal writes the data of a successful purchase with gqlgen's
// marshalers, field by field in document order.
func (plan *purchasePlan) marshal(res *model.SeckillResult) json.RawMessage {
	b := bytes.NewBuffer(make([]byte, 0, 128)) // a purchase's answer, at once
	b.WriteByte('{')
	graphql.MarshalString(plan.key).MarshalGQL(b)
	b.WriteString(":{")
	for i, f := range plan.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		graphql.MarshalString(f.key).MarshalGQL(b)
		b.WriteByte(':')
		switch f.name {
		case "outcome":
			res.Outcome.MarshalGQL(b)
		case "orderId":
			if res.OrderID == nil {
				graphql.Null.MarshalGQL(b)
			} else {
				graphql.MarshalID(*res.OrderID).MarshalGQL(b)
			}
		case "message":
			graphql.MarshalString(res.Message).MarshalGQL(b)
		case "retryAfter":
			if res.RetryAfter == nil {
				graphql.Null.MarshalGQL(b)
			} else {
				graphql.MarshalInt32(*res.RetryAfter).MarshalGQL(b)
			}
		case "__typename":
			graphql.MarshalString("SeckillResult").MarshalGQL(b)
		}
	}
	b.WriteString("}}")
	return b.Bytes()
}
