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
