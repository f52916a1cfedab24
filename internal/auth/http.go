package auth

import (
	"net/http"

	"seckill/internal/seckill"
)

// Middleware authenticates requests that carry an Authorization header and
// puts their user into the request's context. A request without the header
// goes on anonymously: the service decides what an anonymous caller may do.
// A request with an invalid, expired or non-Bearer credential is answered
// 401 with a GraphQL-style JSON error and goes no further.
func (t *Tokens) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r)
			return
		}
		u, err := t.Parse(FromHeader(h))
		if err != nil {
			writeUnauthorized(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(seckill.NewContextWithUser(r.Context(), u)))
	})
}

// unauthorizedBody is the answer to a bad credential; it names no reason, so
// it tells a prober nothing about which check failed.
const unauthorizedBody = `{"errors":[{"message":"invalid token","extensions":{"code":"UNAUTHENTICATED"}}]}` + "\n"

// writeUnauthorized answers 401 with a GraphQL-style JSON error.
func writeUnauthorized(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(unauthorizedBody))
}
