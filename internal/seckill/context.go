package seckill

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

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

func requireUser(ctx context.Context) (*User, error) {
	u := UserFromContext(ctx)
	if u == nil {
		return nil, Errorf(EUNAUTHENTICATED, "missing token")
	}
	return u, nil
}

func requireAdmin(ctx context.Context) (*User, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if !u.Admin {
		return nil, Errorf(EFORBIDDEN, "admin role required")
	}
	return u, nil
}

// required refuses to build part of the domain without a dependency:
// missing names each one that is nil.
func required(part string, missing map[string]bool) error {
	var names []string
	for name, nil := range missing {
		if nil {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("seckill: %s need %s", part, strings.Join(names, ", "))
}
