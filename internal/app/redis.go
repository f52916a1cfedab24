package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/config"
)

// openRedis returns the one Redis client of the process for the configured
// topology (single node, cluster or Sentinel), and the size of its pool per
// server. Every topology gets the same bounds (past RedisTimeout a purchase
// is answered UNAVAILABLE, not after go-redis's defaults of 3 s reads, 5 s
// dials and retries) and the same guard: before a connection to a Redis
// server this process has not seen (a restart, a failover) carries
// anything, hook stops the campaigns whose state that server may have lost,
// until they are rebuilt. On a cluster each node has its own guard.
//
// A nil hook installs no guard: for a command that only reads.
func openRedis(cfg *config.Config, hook *admission.ConnectHook) (redis.UniversalClient, int, error) {
	guard := func(addr string) func(context.Context, *redis.Conn) error {
		if hook == nil {
			return nil
		}
		return hook.For(addr)
	}
	timeout := cfg.RedisTimeout
	pool := cfg.RedisPoolSize
	if pool == 0 {
		pool = 10 * runtime.GOMAXPROCS(0) // go-redis's default
	}
	var tlsConfig *tls.Config
	if cfg.RedisTLS {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch cfg.RedisTopology() {
	case config.RedisCluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    cfg.RedisClusterAddrs,
			Username: cfg.RedisUsername, Password: cfg.RedisPassword, TLSConfig: tlsConfig,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			PoolSize: pool, MaxRetries: 1,
			// A MOVED or ASK after a failover is followed, not a retry.
			MaxRedirects: 3,
			NewClient: func(opt *redis.Options) *redis.Client {
				opt.OnConnect = guard(opt.Addr)
				return redis.NewClient(opt)
			},
		}), pool, nil
	case config.RedisSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:       cfg.RedisSentinelMaster,
			SentinelAddrs:    cfg.RedisSentinelAddrs,
			SentinelPassword: cfg.RedisSentinelPassword,
			Username:         cfg.RedisUsername, Password: cfg.RedisPassword, TLSConfig: tlsConfig,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			PoolSize: pool, MaxRetries: 1,
			// Sentinel moves the master; the guard follows whichever
			// server the connection reaches.
			OnConnect: guard(""),
		}), pool, nil
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, 0, fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	opt.PoolSize = pool
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	opt.PoolTimeout = timeout
	opt.MaxRetries = 1
	opt.OnConnect = guard("")
	return redis.NewClient(opt), pool, nil
}

// redisWhere names the configured Redis for an error message.
func redisWhere(cfg *config.Config) string {
	switch cfg.RedisTopology() {
	case config.RedisCluster:
		return "redis cluster at " + strings.Join(cfg.RedisClusterAddrs, ",")
	case config.RedisSentinel:
		return fmt.Sprintf("redis master %q of sentinels %s", cfg.RedisSentinelMaster, strings.Join(cfg.RedisSentinelAddrs, ","))
	}
	if opt, err := redis.ParseURL(cfg.RedisURL); err == nil {
		return "redis at " + opt.Addr
	}
	return "redis"
}
