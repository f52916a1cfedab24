package bench

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"seckill/internal/auth"
)

// mintTokens signs a token for each of n users from userLo, on every core,
// with auth's ordinary token issuing.
func mintTokens(ctx context.Context, tokens *auth.Tokens, userLo int64, n int, ttl time.Duration) ([]string, error) {
	out := make([]string, n)
	workers := min(runtime.GOMAXPROCS(0), max(n/1000, 1))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if i%4096 == 0 && ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				t, err := tokens.Issue(userLo+int64(i), false, ttl)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = "Bearer " + t
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
