package eventhook

import (
	"net"
	"time"

	"seckill/internal/seckill"
)

// NewSenderWithResolver is NewSender resolving names with r.
func NewSenderWithResolver(timeout time.Duration, policy seckill.EndpointPolicy, r *net.Resolver) *Sender {
	return newSender(timeout, policy, r)
}
