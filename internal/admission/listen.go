package admission

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// listener holds one process's subscription to one channel.
type listener struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has stopped
}

// listen subscribes to channel, waits (within ctx) until Redis confirmed it
// (so a message published after listen returns is heard), and calls handle with each
// message's payload from one goroutine until stop is called. go-redis
// reconnects a broken connection and subscribes again by itself; listen
// also covers what go-redis does not: on a cluster, when the slot of a
// sharded channel moves (a failover), the old node ends the subscription
// (sunsubscribe) and keeps the connection, which would leave the process
// deaf for good. listen then subscribes anew through the slot's new master.
// Messages published in between are lost: pub/sub is at most once.
func listen(ctx context.Context, rdb redis.UniversalClient, channel string, logger *slog.Logger, handle func(payload string)) (*listener, error) {
	ps, err := subscribe(ctx, rdb, channel)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &listener{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ps != nil {
			msgs := receive(ctx, ps, handle)
			// Close, then drain: go-redis's reader may be blocked sending
			// us a message, and only exits once it sees the closed
			// connection.
			ps.Close()
			for range msgs {
			}
			if ctx.Err() != nil {
				return
			}
			logger.Warn("redis ended a subscription (its slot moved): subscribing again", "channel", channel)
			ps = resubscribe(ctx, rdb, channel, logger)
		}
	}()
	return l, nil
}

// receive hands ps's messages to handle until ctx ends or Redis ends the
// subscription, and returns ps's channel.
func receive(ctx context.Context, ps *redis.PubSub, handle func(string)) <-chan any {
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return msgs
		case m, ok := <-msgs:
			if !ok {
				return msgs
			}
			switch m := m.(type) {
			case *redis.Message:
				handle(m.Payload)
			case *redis.Subscription:
				if (m.Kind == "sunsubscribe" || m.Kind == "unsubscribe") && m.Count == 0 {
					return msgs
				}
			}
		}
	}
}

// resubscribe subscribes to channel again, retrying (with the cluster's
// slot map reloaded) until it succeeds or ctx ends; nil then.
func resubscribe(ctx context.Context, rdb redis.UniversalClient, channel string, logger *slog.Logger) *redis.PubSub {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		ps, err := subscribe(ctx, rdb, channel)
		if err == nil {
			return ps
		}
		logger.Warn("subscribe again", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// stop ends the subscription and waits for the goroutine.
func (l *listener) stop() {
	l.cancel()
	<-l.done
}

// subscribe opens a PubSub on channel and waits for Redis to confirm it, so
// that a message published after it returns is not lost. On a cluster it
// is a sharded subscription, on the node serving the channel's slot.
func subscribe(ctx context.Context, rdb redis.UniversalClient, channel string) (*redis.PubSub, error) {
	var ps *redis.PubSub
	if sharded(rdb) {
		ps = rdb.SSubscribe(ctx, channel)
	} else {
		ps = rdb.Subscribe(ctx, channel)
	}
	msg, err := ps.Receive(ctx)
	if err == nil {
		if _, ok := msg.(*redis.Subscription); !ok {
			err = fmt.Errorf("unexpected %T before the subscription confirmation", msg)
		}
	}
	if err != nil {
		ps.Close()
		return nil, err
	}
	return ps, nil
}

// publish sends msg on channel: SPUBLISH on a cluster, where a plain
// PUBLISH would travel to every node; PUBLISH on a single node or Sentinel's
// master, which may be older than Redis 7.
func publish(ctx context.Context, rdb redis.UniversalClient, channel string, msg any) error {
	if sharded(rdb) {
		return rdb.SPublish(ctx, channel, msg).Err()
	}
	return rdb.Publish(ctx, channel, msg).Err()
}

// channelOf returns the pub/sub channel name for rdb. Redis has one
// pub/sub namespace for all its databases: a client of a database other
// than 0 (a single node or Sentinel's master, SECKILL_REDIS_URL's /N) gets
// channels of its own, name + ":db<N>", so that deployments (or tests) on
// other databases of one server never hear each other's events. Order ids
// repeat across deployments: an order status of one reached a buyer of the
// other's order of the same id.
func channelOf(rdb redis.UniversalClient, name string) string {
	if c, ok := rdb.(*redis.Client); ok && c.Options().DB != 0 {
		return name + ":db" + strconv.Itoa(c.Options().DB)
	}
	return name
}

// sharded reports whether rdb is a Redis Cluster client, whose channels
// are sharded.
func sharded(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}
