// Package graph is the GraphQL edge of the service: the schema (*.graphqls),
// thin resolvers that convert, call the domain once and convert back, and
// the HTTP and WebSocket handler (NewHandler). gqlgen writes graph/generated,
// graph/model/models_gen.go and the skeletons of *.resolvers.go; run
// `go tool gqlgen generate` from the repository root after changing the
// schema.
package graph

import (
	"context"

	"seckill/internal/seckill"
)

// Domain is what the resolvers need of the domain, by part; the caller is
// read from ctx (seckill.UserFromContext), and every permission decision is
// the domain's.
type Domain struct {
	Catalog    Catalog
	Purchases  Purchases
	Challenges Challenges
	Life       Life
	Rooms      Rooms
}

// Catalog reads and creates vouchers (seckill.Catalog).
type Catalog interface {
	// AddSeckillVoucher creates a voucher with its campaign. EUNAUTHENTICATED,
	// EFORBIDDEN (not an admin), EINVALID (naming the field).
	AddSeckillVoucher(ctx context.Context, in seckill.NewSeckillVoucher) (*seckill.Voucher, error)
	// Voucher returns one voucher. ENOTFOUND.
	Voucher(ctx context.Context, id int64) (*seckill.Voucher, error)
	// Vouchers pages through vouchers in id order. EINVALID (first, after).
	Vouchers(ctx context.Context, f seckill.VoucherFilter) ([]*seckill.Voucher, error)
}

// Purchases buys and reads orders (seckill.Purchases).
type Purchases interface {
	// Purchase tries to buy one unit for the caller; expected results are
	// outcomes. EUNAUTHENTICATED, ENOTFOUND.
	Purchase(ctx context.Context, voucherID int64) (seckill.PurchaseResult, error)
	// PurchaseWith is Purchase with the answer to the campaign's challenge
	// (nil: none given).
	PurchaseWith(ctx context.Context, voucherID int64, answer *seckill.ChallengeAnswer, pass string) (seckill.PurchaseResult, error)
	// Order returns an order the caller may see. EUNAUTHENTICATED, ENOTFOUND.
	Order(ctx context.Context, id int64) (*seckill.Order, error)
	// MyOrders returns the caller's orders, newest first. EUNAUTHENTICATED.
	MyOrders(ctx context.Context) ([]*seckill.Order, error)
	// WatchOrder streams an order's status until it is terminal or ctx ends,
	// then closes the channel. EUNAUTHENTICATED, ENOTFOUND.
	WatchOrder(ctx context.Context, id int64) (<-chan seckill.StatusEvent, error)
}

// Challenges hands out challenges (seckill.Challenges).
type Challenges interface {
	// Challenge hands the caller a challenge for a campaign.
	// EUNAUTHENTICATED, ENOTFOUND, ECONFLICT (too early, or ended).
	Challenge(ctx context.Context, voucherID int64) (*seckill.Challenge, error)
}

// Rooms runs the campaigns' waiting rooms (seckill.Rooms).
type Rooms interface {
	// Join puts the caller in a campaign's waiting room (or finds them
	// there) and answers their ticket. EUNAUTHENTICATED, ENOTFOUND,
	// ECONFLICT (no room, not open yet, ended, sold out).
	Join(ctx context.Context, voucherID int64) (*seckill.RoomTicket, error)
	// Status says where a ticket's holder stands. EINVALID (ticket).
	Status(ctx context.Context, voucherID int64, ticket string) (seckill.RoomStatus, error)
	// Watch streams it until a final state or ctx ends.
	Watch(ctx context.Context, voucherID int64, ticket string) (<-chan seckill.RoomStatus, error)
}

// Life pays and cancels orders (seckill.Life).
type Life interface {
	// CreatePayment opens (or returns the open) payment of the caller's
	// order awaiting payment. EUNAUTHENTICATED, ENOTFOUND, ECONFLICT.
	CreatePayment(ctx context.Context, orderID int64) (*seckill.Payment, error)
	// OrderPayments returns the payments of an order the caller may see,
	// oldest first. ENOTFOUND.
	OrderPayments(ctx context.Context, orderID int64) ([]seckill.Payment, error)
	// CancelOrder cancels the caller's order awaiting payment.
	// EUNAUTHENTICATED, ENOTFOUND, ECONFLICT.
	CancelOrder(ctx context.Context, id int64) (*seckill.Order, error)
}

var (
	_ Catalog    = (*seckill.Catalog)(nil)
	_ Purchases  = (*seckill.Purchases)(nil)
	_ Challenges = (*seckill.Challenges)(nil)
	_ Life       = (*seckill.Life)(nil)
	_ Rooms      = (*seckill.Rooms)(nil)
)

// Resolver is the root resolver; its fields are its dependencies.
type Resolver struct {
	Domain
}
