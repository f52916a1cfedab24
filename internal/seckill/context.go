package seckill

import "context"

// User is the caller, as proven by a token or a session.
type User struct {
	ID    int64
	Admin bool
	// Name is an operator's name when the user signed in to the dashboard;
	// empty for token users. The audit log records it.
	Name string
}

type userContextKey struct{}

// NewContextWithUser returns a copy of ctx that carries user.
func NewContextWithUser(ctx context.Context, user *User) context.Context {
	return context.WithValue(ctx, userContextKey{}, user)
}

// UserFromContext returns the caller, or nil when the request is anonymous.
func UserFromContext(ctx context.Context) *User {
	u, _ := ctx.Value(userContextKey{}).(*User)
	return u
}

type addrContextKey struct{}

// NewContextWithClientAddr returns ctx carrying the address the request came
// from (as package clientaddr found it); the shared per-address limit counts
// attempts by it.
func NewContextWithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, addrContextKey{}, addr)
}

// ClientAddrFromContext returns the request's client address, or "" when
// the edge did not set one.
func ClientAddrFromContext(ctx context.Context) string {
	a, _ := ctx.Value(addrContextKey{}).(string)
	return a
}
