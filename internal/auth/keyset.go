package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// keySet is the identity provider's keys: go-oidc's RemoteKeySet, which
// fetches the JWKS document and fetches it again whenever a signature does
// not verify with the keys it holds (an unknown kid: the provider rotated),
// with two bounds of ours around it.
//
//   - RemoteKeySet refetches on every failed verification, with no limit
//     (v3.21.0, jwks.go: it only joins a fetch already in flight). Anyone
//     can send tokens with made-up kids, so every fetch here goes through
//     one limiter: at most one a minRefetch. A fetch refused by the limiter
//     fails the verification at hand; the keys held stay.
//   - RemoteKeySet never drops a key the provider has withdrawn until some
//     verification fails. A set older than maxAge is replaced with a fresh
//     one (fetched at once, through the limiter), so a withdrawn key stops
//     verifying within maxAge.
type keySet struct {
	url        string
	client     *http.Client // the caller's, or http.DefaultClient
	minRefetch time.Duration
	maxAge     time.Duration
	now        func() time.Time

	lastFetch  atomic.Int64 // Unix ns of the last fetch let through, 0 before any
	fetches    atomic.Int64 // fetches let through
	refused    atomic.Int64 // fetches the limiter refused
	cur        atomic.Pointer[keyGen]
	refreshing sync.Mutex // one replacement at a time
}

// keyGen is one RemoteKeySet and when its keys were last fetched.
type keyGen struct {
	set       *oidc.RemoteKeySet
	fetchedAt atomic.Int64                    // Unix ns of its last successful fetch; 0: none yet
	kids      atomic.Pointer[map[string]bool] // the kids that fetch named
}

// errRefetchLimited is what a fetch refused by the limiter fails with.
var errRefetchLimited = errors.New("auth: key set fetched less than the minimum interval ago")

func newKeySet(url string, client *http.Client, minRefetch, maxAge time.Duration, now func() time.Time) *keySet {
	if client == nil {
		client = http.DefaultClient
	}
	k := &keySet{url: url, client: client, minRefetch: minRefetch, maxAge: maxAge, now: now}
	k.cur.Store(k.newGen())
	return k
}

// newGen returns a RemoteKeySet whose fetches go through the limiter and
// record their success on the generation.
func (k *keySet) newGen() *keyGen {
	g := &keyGen{}
	client := &http.Client{Transport: &limitedTransport{k: k, g: g}, Timeout: 10 * time.Second}
	g.set = oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), client), k.url)
	return g
}

// VerifySignature checks token's signature with the provider's keys and
// returns its payload.
func (k *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	g := k.cur.Load()
	if at := g.fetchedAt.Load(); at != 0 && k.now().Sub(time.Unix(0, at)) >= k.maxAge && k.refreshing.TryLock() {
		defer k.refreshing.Unlock()
		if k.cur.Load() == g { // not replaced meanwhile
			next := k.newGen()
			payload, err := next.verify(ctx, token)
			if next.fetchedAt.Load() != 0 {
				k.cur.Store(next)
				return payload, err
			}
			// The fetch failed or was refused: keep the old keys for now.
		}
	}
	return g.verify(ctx, token)
}

// verify checks token with g's keys. RemoteKeySet looks at the keys it
// holds, then fetches: a verification that found the set still empty (or
// without the new kid) just before a fetch ended asks for another fetch,
// which the limiter refuses, and so does every verification waiting on
// that one. Those are tried once more against the keys the fetch brought,
// so that a burst of first tokens (the process's first seconds, or a
// rotation) is not refused. A token that fails again is refused: at most
// two signature checks a bad token.
func (g *keyGen) verify(ctx context.Context, token string) ([]byte, error) {
	payload, err := g.set.VerifySignature(ctx, token)
	if err != nil && errors.Is(err, errRefetchLimited) && g.fetchedAt.Load() != 0 {
		payload, err = g.set.VerifySignature(ctx, token)
	}
	return payload, err
}

// allow reports whether a fetch may go now, and counts it.
func (k *keySet) allow() bool {
	for {
		last := k.lastFetch.Load()
		now := k.now().UnixNano()
		if last != 0 && now-last < int64(k.minRefetch) {
			k.refused.Add(1)
			return false
		}
		if k.lastFetch.CompareAndSwap(last, now) {
			k.fetches.Add(1)
			return true
		}
	}
}

// limitedTransport is the HTTP transport of one key set generation.
type limitedTransport struct {
	k *keySet
	g *keyGen
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.k.allow() {
		return nil, errRefetchLimited
	}
	tr := t.k.client.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	resp, err := tr.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK {
		// RemoteKeySet keeps the keys only if the body also decodes;
		// a provider that answers 200 with garbage gets one more chance
		// after minRefetch, like any failure.
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return resp, nil // RemoteKeySet fails on the short body
		}
		var set struct {
			Keys []struct {
				KeyID string `json:"kid"`
			} `json:"keys"`
		}
		if json.Unmarshal(body, &set) == nil {
			kids := make(map[string]bool, len(set.Keys))
			for _, k := range set.Keys {
				kids[k.KeyID] = true
			}
			t.g.kids.Store(&kids)
		}
		t.g.fetchedAt.Store(t.k.now().UnixNano())
	}
	return resp, err
}

// maxKeySetBytes bounds a key set document (a few keys take a few kB).
const maxKeySetBytes = 1 << 20

// fetchedAfter reports whether the key set in use was fetched after the
// whole second of t (a JWT's times are whole seconds); false for a zero t.
func (k *keySet) fetchedAfter(t time.Time) bool {
	at := k.cur.Load().fetchedAt.Load()
	return !t.IsZero() && at != 0 && !time.Unix(0, at).Before(t.Truncate(time.Second).Add(time.Second))
}

// holds reports whether the key set last fetched names kid: a token of
// that kid that does not verify is a bad token, not one of a key the
// provider has rotated in since.
func (k *keySet) holds(kid string) bool {
	kids := k.cur.Load().kids.Load()
	return kids != nil && (*kids)[kid]
}
