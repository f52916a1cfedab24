package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"time"

	"seckill/internal/auth"
	"seckill/internal/seckill"
	"seckill/web/views"
)

// SSO signs operators in through an identity provider (auth.SignIn): the
// authorization code flow with PKCE, the operator claim checked on the ID
// token.
type SSO interface {
	// Begin returns the provider's authorization URL and what the browser
	// keeps until it comes back.
	Begin(next string) (string, auth.Pending)
	// AuthorizationOrigin is the origin Begin's URLs are on: the sign-in
	// page's form is answered with a redirect there, which the browser
	// follows only if the page's form-action allows it.
	AuthorizationOrigin() string
	// Finish redeems the code the provider sent back. EUNAUTHENTICATED
	// when the provider does not vouch for the browser, EFORBIDDEN for
	// someone who is not an operator.
	Finish(ctx context.Context, code string, p auth.Pending) (auth.Operator, error)
}

// ProviderAdmins keeps the operators an identity provider vouches for
// (seckill.Operators).
type ProviderAdmins interface {
	// ProviderAdmin returns the operator of (issuer, subject), creating
	// it at first sight. ECONFLICT when no name is left for it.
	ProviderAdmin(ctx context.Context, issuer, subject, name string) (*seckill.Admin, error)
}

// ssoCookie holds a sign-in under way (auth.Pending) between the redirect
// to the provider and its return; ssoTTL is how long it may take.
const (
	ssoCookie = "seckill_sso"
	ssoPath   = "/admin/login/sso"
	ssoTTL    = 10 * time.Minute
)

// ssoStart sends the browser to the provider. It is a POST from the
// sign-in page, so that it passes the cross-origin protection like every
// other sign-in.
func (h *Handler) ssoStart(w http.ResponseWriter, r *http.Request) {
	setCommonHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	u, p := h.cfg.SSO.Begin(safeNext(r.PostFormValue("next")))
	http.SetCookie(w, &http.Cookie{
		Name: ssoCookie, Value: auth.EncodePending(p), Path: ssoPath, MaxAge: int(ssoTTL.Seconds()),
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// ssoCallback is where the provider sends the browser back (a GET: the
// provider's redirect). The state must be the one this browser's cookie
// holds, so that nobody can sign another browser in to their own account;
// the code is redeemed with the PKCE verifier only this browser's cookie
// holds. Then it starts a session as the password sign-in does.
func (h *Handler) ssoCallback(w http.ResponseWriter, r *http.Request) {
	h.signInHeaders(http.HandlerFunc(h.doSSOCallback)).ServeHTTP(w, r)
}

func (h *Handler) doSSOCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	page := views.LoginPage{Meta: views.Meta{Title: "Sign in"}, Next: "/admin", SSO: h.cfg.SSOName}
	fail := func(status int, msg string) {
		page.Error = msg
		h.render(w, r, status, views.Login(page))
	}
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: "", Path: ssoPath, MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
	c, err := r.Cookie(ssoCookie)
	if err != nil {
		fail(http.StatusBadRequest, "That sign-in expired or began in another browser; sign in again.")
		return
	}
	p, err := auth.DecodePending(c.Value)
	q := r.URL.Query()
	if err != nil || p.State == "" || subtle.ConstantTimeCompare([]byte(p.State), []byte(q.Get("state"))) != 1 {
		fail(http.StatusBadRequest, "That sign-in expired or began in another browser; sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		h.logger.WarnContext(ctx, "sso refused by the provider", "error", e, "description", q.Get("error_description"))
		fail(http.StatusUnauthorized, "The identity provider did not sign you in.")
		return
	}
	op, err := h.cfg.SSO.Finish(ctx, q.Get("code"), p)
	switch seckill.ErrorCode(err) {
	case "":
	case seckill.EFORBIDDEN:
		h.logger.WarnContext(ctx, "sso: not an operator", "err", err)
		fail(http.StatusForbidden, seckill.ErrorMessage(err))
		return
	case seckill.EUNAUTHENTICATED:
		h.logger.WarnContext(ctx, "sso failed", "err", err)
		fail(http.StatusUnauthorized, seckill.ErrorMessage(err))
		return
	default:
		fail(statusOf(err), h.messageOf(r, err))
		return
	}
	a, err := h.cfg.ProviderAdmins.ProviderAdmin(ctx, op.Issuer, op.Subject, op.Name)
	if err != nil {
		fail(statusOf(err), h.messageOf(r, err))
		return
	}
	if old, err := r.Cookie(SessionCookie); err == nil && old.Value != "" {
		if err := h.cfg.Sessions.DeleteAdminSession(ctx, old.Value); err != nil {
			h.logger.WarnContext(ctx, "end previous session", "err", err)
		}
	}
	token, expires, err := h.cfg.Sessions.CreateAdminSession(ctx, a.ID, h.cfg.SessionTTL)
	if err != nil {
		fail(statusOf(err), h.messageOf(r, err))
		return
	}
	h.setSessionCookie(w, r, token, expires)
	h.logger.InfoContext(ctx, "admin signed in through the identity provider", "admin", a.Name)
	http.Redirect(w, r, safeNext(p.Next), http.StatusSeeOther)
}
