package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// cuttingConn closes its connection right after it sends a message that
// holds cutAfter (once armed): Postgres gets the statement and runs it,
// and its answer never reaches the client, as when the network or the
// server's process dies at that moment.
type cuttingConn struct {
	net.Conn
	cutAfter *atomic.Pointer[[]byte]
}

func (c *cuttingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if p := c.cutAfter.Load(); p != nil && bytes.Contains(b, *p) && c.cutAfter.CompareAndSwap(p, nil) {
		_ = c.Conn.Close()
	}
	return n, err
}

// TestPersistCommitAnswerLost: a batch whose COMMIT went out and whose
// answer was lost fails with seckill.ErrOutcomeUnknown (Postgres did write
// it: the retry reports it CREATED); one cut before its COMMIT fails
// without it, having written nothing. The service keeps a unit it would
// otherwise release on that difference (secureUnreplicated).
func TestPersistCommitAnswerLost(t *testing.T) {
	dsn := storetest.NewDSN(t)
	plain, err := store.Open(t.Context(), dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var cutAfter atomic.Pointer[[]byte]
	dialer := &net.Dialer{}
	connector := pgdriver.NewConnector(pgdriver.WithDSN(dsn), func(conf *pgdriver.Config) {
		conf.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &cuttingConn{Conn: c, cutAfter: &cutAfter}, nil
		}
	})
	cutting := bun.NewDB(sql.OpenDB(connector), pgdialect.New())
	defer cutting.Close()
	v := storetest.CreateCampaign(t, plain, 10)
	s, healthy := store.New(cutting), store.New(plain)
	cut := func(what string) { b := []byte(what); cutAfter.Store(&b) }

	before := adm(v.ID, 1, 101)
	cut("INSERT INTO")
	if _, err := s.PersistOrders(t.Context(), []seckill.Admission{before}); err == nil || errors.Is(err, seckill.ErrOutcomeUnknown) {
		t.Errorf("batch cut at its INSERT: %v; want an error that is not ErrOutcomeUnknown", err)
	}
	checkState(t, plain, v.ID, campaignState{Stock: 10})

	at := adm(v.ID, 2, 102)
	cut("COMMIT")
	if _, err := s.PersistOrders(t.Context(), []seckill.Admission{at}); !errors.Is(err, seckill.ErrOutcomeUnknown) {
		t.Errorf("batch cut at its COMMIT: %v; want ErrOutcomeUnknown", err)
	}
	got := persist(t, healthy, at)
	checkOutcomes(t, []seckill.PersistOutcome{createdOutcome(at)}, got)
	if got[0].Inserted {
		t.Errorf("the retry inserted order %d again; want it found", at.OrderID)
	}
	checkState(t, plain, v.ID, campaignState{Stock: 9, Orders: map[int64]int64{at.OrderID: 102}})
}
