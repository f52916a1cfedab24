package web

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "seckill_admin"

// secure reports whether the client reached us over TLS, directly or
// through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (h *Handler) setSessionCookie(w http.ResponseWriter, r *http.Request, token string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name:     SessionCookie,
		Value:    token,
		Path:     "/admin",
		Expires:  expires,
		MaxAge:   int(math.Max(1, time.Until(expires).Seconds())),
		HttpOnly: true,
		Secure:   secure(r),
		SameSite: http.SameSiteLaxMode,
	})
}

func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/admin", MaxAge: -1,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode,
	})
}

// sessionAdmin returns the operator of the request's session, or nil.
func (h *Handler) sessionAdmin(r *http.Request) (*seckill.Admin, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	a, err := h.cfg.Sessions.AdminBySession(r.Context(), c.Value)
	if seckill.ErrorCode(err) == seckill.EUNAUTHENTICATED {
		return nil, nil
	}
	return a, err
}

// requireSession lets only requests with a live session through, with the
// operator in their context as an admin user. Others are sent to sign in
// (GET, HEAD) or refused with 401.
func (h *Handler) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := h.sessionAdmin(r)
		if err != nil {
			h.logger.ErrorContext(r.Context(), "read session", "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		if a == nil {
			setCommonHeaders(w.Header())
			w.Header().Set("Cache-Control", "no-store")
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/admin/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		u := &seckill.User{ID: a.ID, Admin: true, Name: a.Name}
		next.ServeHTTP(w, r.WithContext(seckill.NewContextWithUser(r.Context(), u)))
	})
}

// safeNext keeps a post-sign-in destination only when it is a dashboard
// path on this site: never another origin.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.Opaque != "" ||
		strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		!(u.Path == "/admin" || strings.HasPrefix(u.Path, "/admin/")) ||
		strings.HasPrefix(u.Path, "/admin/login") || strings.HasPrefix(u.Path, "/admin/live/") ||
		strings.HasSuffix(u.Path, "/live") {
		return "/admin"
	}
	return u.RequestURI()
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.signInHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next := safeNext(r.URL.Query().Get("next"))
		if a, err := h.sessionAdmin(r); err == nil && a != nil {
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		h.render(w, r, http.StatusOK, views.Login(views.LoginPage{Meta: views.Meta{Title: "Sign in"}, Next: next, SSO: h.cfg.SSOName}))
	})).ServeHTTP(w, r)
}

// login checks the credentials and starts a new session; the session the
// browser had before, if any, ends (a fresh token at every sign-in).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	h.signInHeaders(http.HandlerFunc(h.doLogin)).ServeHTTP(w, r)
}

func (h *Handler) doLogin(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user := strings.TrimSpace(r.PostFormValue("user"))
	password := r.PostFormValue("password")
	page := views.LoginPage{Meta: views.Meta{Title: "Sign in"}, User: user, Next: safeNext(r.PostFormValue("next")), SSO: h.cfg.SSOName}
	ip := h.cfg.ClientAddr.Addr(r)

	wait, slow, err := h.limiter.AllowLogin(ctx, ip, user)
	if err != nil {
		h.logger.ErrorContext(r.Context(), "login rate limit", "err", err)
		page.Error = "Signing in is unavailable right now; try again in a moment."
		h.render(w, r, http.StatusServiceUnavailable, views.Login(page))
		return
	}
	if wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		h.logger.WarnContext(r.Context(), "login rate limited", "ip", ip, "user", user)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		page.Error = "Too many sign-in attempts from your address. Try again in " + strconv.Itoa(secs) + " s."
		h.render(w, r, http.StatusTooManyRequests, views.Login(page))
		return
	}
	if slow {
		// Someone, maybe from many addresses, is guessing this name's
		// password: every attempt on it waits, the operator's too, but
		// none from an address that has not failed on it is refused.
		t := time.NewTimer(h.cfg.LoginSlowDown)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	a, err := h.cfg.Sessions.AuthenticateAdmin(ctx, user, password)
	if seckill.ErrorCode(err) == seckill.EUNAUTHENTICATED {
		h.logger.WarnContext(r.Context(), "login failed", "ip", ip, "user", user, "slowed", slow)
		if err := h.limiter.LoginFailed(ctx, ip, user); err != nil {
			h.logger.ErrorContext(r.Context(), "count login failure", "err", err)
		}
		page.Error = "Wrong user name or password."
		h.render(w, r, http.StatusUnauthorized, views.Login(page))
		return
	} else if err != nil {
		page.Error = h.messageOf(r, err)
		h.render(w, r, statusOf(err), views.Login(page))
		return
	}
	if err := h.limiter.LoginSucceeded(ctx, ip, user); err != nil {
		h.logger.ErrorContext(r.Context(), "count login success", "err", err)
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if err := h.cfg.Sessions.DeleteAdminSession(ctx, c.Value); err != nil {
			h.logger.WarnContext(r.Context(), "end previous session", "err", err)
		}
	}
	token, expires, err := h.cfg.Sessions.CreateAdminSession(ctx, a.ID, h.cfg.SessionTTL)
	if err != nil {
		page.Error = h.messageOf(r, err)
		h.render(w, r, statusOf(err), views.Login(page))
		return
	}
	h.setSessionCookie(w, r, token, expires)
	h.logger.InfoContext(r.Context(), "admin signed in", "admin", a.Name, "ip", ip)
	http.Redirect(w, r, page.Next, http.StatusSeeOther)
}

// logout ends the session in the database, so the cookie is worthless even
// if it was copied, and clears it.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if err := h.cfg.Sessions.DeleteAdminSession(r.Context(), c.Value); err != nil {
			h.logger.ErrorContext(r.Context(), "end session", "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	clearSessionCookie(w, r)
	setCommonHeaders(w.Header())
	http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
}
