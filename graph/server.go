package graph

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"seckill/graph/generated"
	"seckill/graph/model"
	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
)

// TokenParser verifies a bearer token (without the "Bearer " prefix) and
// returns its user; *auth.Verifier (every configured mode) and *auth.Tokens
// (HS256 only) implement it. UNAVAILABLE means the token could not be
// checked for now (an identity provider's new subject while Postgres is
// away); any other error means it is not acceptable.
type TokenParser interface {
	Authenticate(ctx context.Context, token string) (*seckill.User, error)
}

// Defaults for the zero values of Options.
const (
	DefaultComplexityLimit   = 200
	DefaultMaxDepth          = 10
	DefaultMaxSelections     = 1000
	DefaultMaxBodyBytes      = 64 << 10
	DefaultPingInterval      = 15 * time.Second
	DefaultKeepAliveInterval = 10 * time.Second
	DefaultInitTimeout       = 10 * time.Second
)

// RetryAfterSeconds is the hint (extensions.retryAfter) that comes with an
// UNAVAILABLE error: the sale is being restored, or Redis is out of reach.
const RetryAfterSeconds = 1

// WebSocket close codes for a refused connection_init, as the graphql-ws
// clients expect them: they do not reconnect after either.
const (
	CloseUnauthorized = 4401 // no token
	CloseForbidden    = 4403 // a token that does not verify
	CloseTryAgain     = 1013 // the token could not be checked for now (RFC 6455 "Try Again Later")
)

// Options tunes NewHandler. The zero value is usable: every zero field takes
// its default.
type Options struct {
	// ClientAddr finds each request's client address (the shared
	// per-address purchase limit counts by it); the zero Resolver trusts
	// no proxy.
	ClientAddr clientaddr.Resolver
	// Logger receives internal errors and recovered panics; nil means
	// slog.Default().
	Logger *slog.Logger
	// ComplexityLimit bounds gqlgen's complexity score of each operation
	// and fragment of a document (every field costs 1, introspection
	// below __schema nothing). Default DefaultComplexityLimit.
	ComplexityLimit int
	// MaxDepth bounds how deeply an operation nests its selections.
	// Default DefaultMaxDepth.
	MaxDepth int
	// MaxSelections bounds the selections (fields, fragment spreads and
	// inline fragments) of a whole document, its operations and fragment
	// definitions each counted with their fragments expanded. It bounds
	// the work of validating a document, and introspection queries, which
	// the complexity does not count (GraphiQL's counts 468). Default
	// DefaultMaxSelections.
	MaxSelections int
	// MaxBodyBytes bounds a request body, a GET query string and one
	// WebSocket message. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// AllowedOrigins are the origin patterns (github.com/coder/websocket
	// AcceptOptions.OriginPatterns, e.g. "app.example.com" or
	// "*.example.com") whose pages may open a WebSocket. Empty means
	// same-origin only. Plain HTTP requests are not affected: the CORS
	// policy, if any, belongs to whoever mounts the handler.
	AllowedOrigins []string
	// Introspection allows __schema and __type queries. The zero value
	// refuses them: turn it on in development.
	Introspection bool
	// PingInterval is how often the server pings a graphql-transport-ws
	// client; a client that does not answer within twice the interval is
	// dropped. Default DefaultPingInterval; negative turns pings off.
	PingInterval time.Duration
	// KeepAliveInterval is how often the server sends "ka" to a legacy
	// graphql-ws client. Default DefaultKeepAliveInterval; negative turns
	// it off.
	KeepAliveInterval time.Duration
	// InitTimeout is how long a new WebSocket may take to send
	// connection_init. Default DefaultInitTimeout.
	InitTimeout time.Duration
	// AroundOperations, when set, wraps every operation, whichever path
	// answers it: gqlgen runs it as its AroundOperations middleware, and
	// the purchase fast path calls it the same way, with an
	// OperationContext holding the operation, its name and variables, and
	// a ResponseHandler giving the response (errors included). This is the
	// place for tracing and request metrics; an extension added to the
	// gqlgen server in another way is skipped by the fast path
	// (TestFastPathFence fails until the fast path says how it honours it).
	AroundOperations graphql.OperationMiddleware

	// genericOnly turns the purchase fast path off, so that tests can
	// compare it with gqlgen's answers.
	genericOnly bool
	// onFastPath, when set, is called each time the fast path answers.
	onFastPath func()
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ComplexityLimit <= 0 {
		o.ComplexityLimit = DefaultComplexityLimit
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxSelections <= 0 {
		o.MaxSelections = DefaultMaxSelections
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	o.PingInterval = orDefault(o.PingInterval, DefaultPingInterval)
	o.KeepAliveInterval = orDefault(o.KeepAliveInterval, DefaultKeepAliveInterval)
	if o.InitTimeout <= 0 {
		o.InitTimeout = DefaultInitTimeout
	}
	return o
}

func (o Options) limits() limits {
	return limits{
		complexity:    o.ComplexityLimit,
		depth:         o.MaxDepth,
		selections:    o.MaxSelections,
		introspection: o.Introspection,
	}
}

// orDefault maps 0 to def and a negative duration to 0, which gqlgen reads
// as "off".
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// NewHandler returns the GraphQL endpoint: queries and mutations over POST
// (application/json), queries over GET, and everything (subscriptions
// included) over WebSocket with either the graphql-transport-ws or the
// legacy graphql-ws subprotocol.
//
// Authentication applies to every transport. An HTTP request's
// "Authorization: Bearer <token>" header is verified with tokens; without
// a token (no header, or "Bearer" and nothing else) the request is
// anonymous, and with a bad one it is answered 401. A WebSocket must
// present its token in the connection_init payload
// ({"Authorization": "Bearer <token>"}) unless
// its upgrade request was authenticated: without one it is closed with
// 4401, with a bad one with 4403. The resolvers leave every permission
// decision to the domain.
//
// The purchase mutation, which is nearly all of a sale's traffic, is
// answered by a fast path that skips gqlgen's generic executor but gives
// the same answers (see purchase.go); every other request goes to gqlgen.
func NewHandler(d Domain, tokens TokenParser, opts Options) http.Handler {
	opts = opts.withDefaults()
	log := opts.Logger

	resolver := &Resolver{Domain: d}
	schema := generated.NewExecutableSchema(generated.Config{Resolvers: resolver})
	srv := handler.New(schema)
	// WebSocket first: it claims any request with an Upgrade header. No
	// multipart or form transports: a cross-site HTML form could reach them
	// without a CORS preflight.
	readLimit := opts.MaxBodyBytes
	srv.AddTransport(transport.Websocket{
		Implementation: initFirst{transport.CoderWebsocketImplementation{
			AcceptOptions: websocket.AcceptOptions{OriginPatterns: opts.AllowedOrigins},
		}},
		InitFunc:              websocketInit(tokens),
		InitTimeout:           opts.InitTimeout,
		PingPongInterval:      opts.PingInterval,      // graphql-transport-ws
		KeepAlivePingInterval: opts.KeepAliveInterval, // graphql-ws
		PayloadReadLimit:      &readLimit,
		ErrorFunc: func(ctx context.Context, err error) {
			// Mostly clients going away without a close frame.
			log.DebugContext(ctx, "graphql: websocket", "err", err)
		},
	})
	// GET and POST as the GraphQL-over-HTTP spec says (transport.go).
	srv.AddTransport(httpGET{}) // refuses mutations itself
	srv.AddTransport(httpPOST{})

	cache := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(cache)
	if opts.Introspection {
		srv.Use(extension.Introspection{})
	}
	// The limits run before gqlgen parses and validates a document (see
	// limits.go); they replace gqlgen's complexity extension, which
	// expands every fragment spread again.
	srv.Use(documentLimits{limits: opts.limits(), cache: cache})
	srv.SetValidationRulesFn(validationRules(opts.Introspection))
	srv.SetDisableSuggestion(!opts.Introspection)
	srv.Use(exactEnums{schema: schema.Schema()})
	srv.Use(operationNamer{})
	if opts.AroundOperations != nil {
		srv.AroundOperations(opts.AroundOperations)
	}
	srv.SetRecoverFunc(recoverFunc(log))
	srv.SetErrorPresenter(presentError(log))

	e := &endpoint{gql: srv}
	var h http.Handler = srv
	if !opts.genericOnly {
		e.fast = newPurchasePath(schema, resolver, opts, srv)
		h = e.fast
	}
	e.Handler = limitBody(opts.MaxBodyBytes, identify(opts.ClientAddr, tokens, h))
	return e
}

// endpoint is what NewHandler returns: the handler, and its parts for the
// tests to look into.
type endpoint struct {
	http.Handler
	gql  *handler.Server
	fast *purchasePath // nil when the fast path is off
}

// identify puts the request's client address into its context, for the
// shared per-address limit (WebSocket operations inherit it from the
// upgrade request), and the user of a valid bearer token; see NewHandler.
// One copy of the request carries both.
func identify(res clientaddr.Resolver, tokens TokenParser, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if a := res.Addr(r); a != "" {
			ctx = seckill.NewContextWithClientAddr(ctx, a)
		}
		if token, ok := bearerToken(r.Header.Get("Authorization")); ok {
			u, err := tokens.Authenticate(ctx, token)
			if seckill.ErrorCode(err) == seckill.EUNAVAILABLE {
				w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
				writeJSONError(w, http.StatusServiceUnavailable, seckill.ErrorMessage(err), seckill.EUNAVAILABLE)
				return
			}
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				writeJSONError(w, http.StatusUnauthorized, refusedTokenMessage(token, err), seckill.EUNAUTHENTICATED)
				return
			}
			ctx = seckill.NewContextWithUser(ctx, u)
		}
		if ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// websocketInit authenticates a WebSocket at connection_init. An anonymous
// socket is refused: the only subscription needs a user.
func websocketInit(tokens TokenParser) transport.WebsocketInitFunc {
	return func(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		token, ok := bearerToken(p.Authorization()) // "Authorization" or "authorization"
		if !ok {
			if seckill.UserFromContext(ctx) != nil {
				return ctx, nil, nil // the upgrade request carried a valid token
			}
			ctx = transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, CloseUnauthorized), "Unauthorized")
			return ctx, nil, errors.New("authentication required: send {\"Authorization\": \"Bearer <token>\"} in connection_init")
		}
		u, err := tokens.Authenticate(ctx, token)
		if seckill.ErrorCode(err) == seckill.EUNAVAILABLE {
			ctx = transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, CloseTryAgain), "Try Again Later")
			return ctx, nil, errors.New(seckill.ErrorMessage(err))
		}
		if err != nil {
			ctx = transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, CloseForbidden), "Forbidden")
			return ctx, nil, errors.New(refusedTokenMessage(token, err))
		}
		return seckill.NewContextWithUser(ctx, u), nil, nil
	}
}

// refusedTokenMessage is what a client is told of a token refused for good:
// the parser's own reason when it is a domain error (such as "token
// expired", or a subject that cannot be stored), so that a client can tell
// a token to renew from one to fix; anything else, and a credential of
// another scheme (token ""), is "invalid token".
func refusedTokenMessage(token string, err error) string {
	if token != "" && seckill.ErrorCode(err) == seckill.EUNAUTHENTICATED {
		return seckill.ErrorMessage(err)
	}
	return "invalid token"
}

// bearerToken reads an Authorization header value. Nothing, or the Bearer
// scheme with nothing after it ("Bearer", "Bearer "), is no token at all
// (!ok): a shell variable that came out empty makes the request anonymous,
// not wrongly signed. Otherwise it returns the token of "Bearer <token>"
// (the scheme in any case), or "" for another scheme, which no TokenParser
// accepts.
func bearerToken(h string) (token string, ok bool) {
	const scheme = "bearer"
	h = strings.TrimSpace(h)
	if h == "" || strings.EqualFold(h, scheme) {
		return "", false
	}
	if len(h) > len(scheme) && strings.EqualFold(h[:len(scheme)], scheme) && (h[len(scheme)] == ' ' || h[len(scheme)] == '\t') {
		return strings.TrimSpace(h[len(scheme)+1:]), true
	}
	return "", true
}

// limitBody refuses request bodies and GET query strings longer than max
// with 413. WebSocket upgrades pass untouched (they have no body; the
// transport bounds each message).
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		if int64(len(r.URL.RawQuery)) > max || r.ContentLength > max {
			writeTooLarge(w, max)
			return
		}
		if r.ContentLength < 0 {
			// Unknown length (chunked): read it here, so that an oversized
			// body gets the same clear answer instead of a failed read
			// deep in the transport.
			body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
			if err != nil {
				writeJSONError(w, http.StatusBadRequest, "could not read the request body", "BAD_REQUEST")
				return
			}
			if int64(len(body)) > max {
				writeTooLarge(w, max)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		} else {
			// net/http stops at Content-Length already; this also tells it
			// to close a connection whose client keeps sending.
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

func writeTooLarge(w http.ResponseWriter, max int64) {
	w.Header().Set("Connection", "close")
	writeJSONError(w, http.StatusRequestEntityTooLarge,
		"request too large: the limit is "+byteSize(max), "PAYLOAD_TOO_LARGE")
}

func byteSize(n int64) string {
	if n%1024 == 0 {
		return formatID(n/1024) + " KiB"
	}
	return formatID(n) + " bytes"
}

// writeJSONError answers with one GraphQL-style error and no data: the
// request never reached GraphQL execution.
func writeJSONError(w http.ResponseWriter, status int, message, code string) {
	type errorBody struct {
		Errors []*gqlerror.Error `json:"errors"`
	}
	body, _ := json.Marshal(errorBody{Errors: []*gqlerror.Error{{
		Message:    message,
		Extensions: map[string]any{"code": code},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// errRecovered is what a client sees of a panic: the panic is logged by
// recoverFunc, and presentError does not log it a second time.
var errRecovered = &seckill.Error{Code: seckill.EINTERNAL, Message: "internal error"}

func recoverFunc(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "graphql: panic", "panic", p, "path", graphql.GetPath(ctx).String(),
			"operation", operationName(ctx), "stack", string(debug.Stack()))
		return errRecovered
	}
}

// presentError maps every error to the wire once. Domain errors show their
// code (extensions.code), their safe message and, for INVALID_INPUT, the
// field (extensions.field) and, when several fields are wrong, each with
// its message (extensions.fields). Errors gqlgen already coded (parse, validation,
// complexity) and its own messages about the request stay as they are. Any
// other error is internal: it is logged here, with its path, and the client
// sees only "internal error".
func presentError(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gerr := graphql.DefaultErrorPresenter(ctx, err)
		if errors.Is(err, errRecovered) {
			return internalError(gerr)
		}
		if derr, ok := errors.AsType[*seckill.Error](err); ok && derr.Code != seckill.EINTERNAL {
			gerr.Message = derr.Message
			setExtension(gerr, "code", derr.Code)
			if derr.Field != "" {
				setExtension(gerr, "field", derr.Field)
			}
			if all := seckill.AllFieldErrors(err); len(all) > 1 {
				// Every field that is wrong, for a form to show at once;
				// the message and field above are the first's.
				fields := make([]map[string]string, len(all))
				for i, e := range all {
					fields[i] = map[string]string{"field": e.Field, "message": e.Message}
				}
				setExtension(gerr, "fields", fields)
			}
			if derr.Code == seckill.EUNAVAILABLE {
				// Retryable: a hint, in seconds, for clients and proxies.
				setExtension(gerr, "retryAfter", RetryAfterSeconds)
			}
			return gerr
		}
		if cerr, ok := errors.AsType[*model.CoercionError](err); ok {
			// A value a scalar does not take (a string for an Int, an Int
			// beyond 32 bits): the spec's input coercion refuses it, and
			// the path names the field or argument it was given for.
			field := lastPathName(gerr.Path)
			gerr.Message = cmp.Or(field, "a value") + " " + cerr.Error()
			setExtension(gerr, "code", seckill.EINVALID)
			setExtension(gerr, "field", field)
			return gerr
		}
		if _, ok := gerr.Extensions["code"]; ok {
			return gerr
		}
		if gerr.Unwrap() == nil {
			// A message gqlgen wrote itself, about the request.
			return gerr
		}
		log.ErrorContext(ctx, "graphql: internal error", "path", gerr.Path.String(),
			"operation", operationName(ctx), "err", err)
		return internalError(gerr)
	}
}

func internalError(gerr *gqlerror.Error) *gqlerror.Error {
	return &gqlerror.Error{
		Message:    "internal error",
		Path:       gerr.Path,
		Locations:  gerr.Locations,
		Extensions: map[string]any{"code": seckill.EINTERNAL},
	}
}

func setExtension(gerr *gqlerror.Error, key string, value any) {
	if gerr.Extensions == nil {
		gerr.Extensions = map[string]any{}
	}
	gerr.Extensions[key] = value
}

func lastPathName(p ast.Path) string {
	for i := len(p) - 1; i >= 0; i-- {
		if name, ok := p[i].(ast.PathName); ok {
			return string(name)
		}
	}
	return ""
}

func operationName(ctx context.Context) string {
	if !graphql.HasOperationContext(ctx) {
		return ""
	}
	return graphql.GetOperationContext(ctx).OperationName
}
