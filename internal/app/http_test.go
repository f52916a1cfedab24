package app

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

// TestStripeServesNoBuiltinWebhook: with Stripe as the provider the built-in
// webhook is not served, so an event signed with the built-in scheme (here
// with the development secret, which development used to give Stripe too)
// cannot mark an order paid around Stripe's signature.
func TestStripeServesNoBuiltinWebhook(t *testing.T) {
	e, v, _ := newStripeEnv(t, 2)
	id := e.buyCreated(v, 41)
	p := e.createPaymentAPI(id, 41)
	ev := seckill.PaymentEvent{ID: "evt_builtin_1", Type: seckill.EventPaymentSucceeded, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
	status, body, err := payhook.Send(e.ctx, http.DefaultClient, e.url+"/webhooks/payments", []byte(config.DevWebhookSecret), ev)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusNotFound {
		t.Errorf("POST /webhooks/payments beside Stripe: %d %s, want 404", status, body)
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Fatalf("order %s after a built-in event beside Stripe, want CREATED", st)
	}
}

// TestProductionRefusesDiscoveredPlainKeys: in production the key set that
// the provider's discovery names is fetched over https (or http on a
// loopback host) only, as SECKILL_AUTH_JWKS_URL is: a start is refused
// otherwise, naming the variable.
func TestProductionRefusesDiscoveredPlainKeys(t *testing.T) {
	dsn := storetest.NewDSN(t)
	for _, tc := range []struct {
		jwks   string
		refuse bool
	}{
		{"http://idp.example/jwks", true},
		{"http://10.0.0.7:8080/jwks", true},
		{"https://idp.example/jwks", false},
		{"http://127.0.0.1:1/jwks", false},
	} {
		var idp *httptest.Server
		idp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"issuer": idp.URL, "jwks_uri": tc.jwks,
				"authorization_endpoint": idp.URL + "/auth", "token_endpoint": idp.URL + "/token"})
		}))
		vars := testenv.ServerVars(dsn, testenv.RedisURL(t, testenv.OwnedDB(testenv.RedisDBApp)))
		prodVars(vars)
		vars["SECKILL_AUTH_ISSUER"], vars["SECKILL_AUTH_AUDIENCE"], vars["SECKILL_AUTH_HS256"] = idp.URL, "seckill-api", "false"
		cfg, err := config.Load(func(k string) string { return vars[k] })
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if a != nil {
			a.Close()
		}
		idp.Close()
		switch {
		case tc.refuse && (err == nil || !strings.Contains(err.Error(), "SECKILL_AUTH_ISSUER: the provider's discovery names the key set")):
			t.Errorf("discovery naming %s: %v, want a refusal naming SECKILL_AUTH_ISSUER", tc.jwks, err)
		case !tc.refuse && err != nil:
			t.Errorf("discovery naming %s: %v", tc.jwks, err)
		}
	}
}
