// Package web is the dashboard edge: server-rendered pages (templ, in
// views/) under /admin for the operators of a flash sale, their sign-in and
// sessions, the live fragments the pages poll, the charts drawn from the
// history a background sampler keeps (read through History), and the Asynq
// monitor mounted at /admin/queues/.
//
// Security: every page but the sign-in form and the static files needs a
// session (a random token in an HttpOnly, SameSite=Lax cookie, Secure behind
// TLS; only its hash is stored, and signing out deletes it). Bearer tokens
// are ignored here: an API token, even an admin's, opens nothing. Every
// state change is a POST, and every non-safe request, sign-in included,
// passes http.CrossOriginProtection. Sign-in attempts are refused per
// client address and per (address, user name); when a user name's failures
// from every address pile up its attempts are slowed, and refused only from
// addresses that have failed on it themselves: a guesser cannot lock out an
// operator who knows the password (LoginLimiter).
package web

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
	"seckill/web/views"
)

// Campaigns is the catalog the dashboard manages (seckill.Catalog).
type Campaigns interface {
	// AddSeckillVoucher creates a campaign. EINVALID names the field.
	AddSeckillVoucher(ctx context.Context, in seckill.NewSeckillVoucher) (*seckill.Voucher, error)
	// Voucher returns a voucher with its live stock. ENOTFOUND.
	Voucher(ctx context.Context, id int64) (*seckill.Voucher, error)
	// UpdateCampaign, PauseCampaign, ResumeCampaign, EndCampaign and
	// AddStock manage a campaign: EINVALID (with the field), ECONFLICT,
	// ENOTFOUND, EUNAVAILABLE.
	UpdateCampaign(ctx context.Context, id int64, e seckill.CampaignEdit) (*seckill.Voucher, error)
	PauseCampaign(ctx context.Context, id int64) (*seckill.Voucher, error)
	ResumeCampaign(ctx context.Context, id int64) (*seckill.Voucher, error)
	EndCampaign(ctx context.Context, id int64) (*seckill.Voucher, error)
	AddStock(ctx context.Context, id, n int64) (*seckill.Voucher, error)
	// UpdateGuard sets a campaign's challenge (before it starts) and brake.
	// EINVALID (with the field), ECONFLICT, ENOTFOUND, EUNAVAILABLE.
	UpdateGuard(ctx context.Context, id int64, e seckill.GuardEdit) (*seckill.Voucher, error)
	// CampaignQuiz returns a campaign's quiz questions. Admins only.
	CampaignQuiz(ctx context.Context, id int64) ([]seckill.QuizQuestion, error)
}

// Orders reads and cancels orders (seckill.Purchases and seckill.Life).
type Orders interface {
	// Order returns an order, queued ones included. ENOTFOUND.
	Order(ctx context.Context, id int64) (*seckill.Order, error)
	// AdminCancelOrder cancels an order awaiting payment, audited.
	// ENOTFOUND, ECONFLICT (not awaiting payment).
	AdminCancelOrder(ctx context.Context, id int64) (*seckill.Order, error)
}

// Records reads what the dashboard shows from the system of record.
type Records interface {
	// Campaigns returns seckill vouchers, newest first.
	Campaigns(ctx context.Context, f seckill.CampaignFilter) ([]*seckill.Voucher, error)
	// CampaignTotals reads stock and order counts in one snapshot. ENOTFOUND.
	CampaignTotals(ctx context.Context, voucherID int64) (seckill.CampaignTotals, error)
	// CampaignOrders returns persisted orders, newest first.
	CampaignOrders(ctx context.Context, f seckill.OrderFilter) ([]*seckill.Order, error)
	// AuditLog returns a campaign's audit entries, newest first.
	AuditLog(ctx context.Context, voucherID int64, limit int) ([]seckill.AuditEntry, error)
}

// Sessions signs operators in and out.
type Sessions interface {
	// AuthenticateAdmin checks a name and password. EUNAUTHENTICATED.
	AuthenticateAdmin(ctx context.Context, name, password string) (*seckill.Admin, error)
	// CreateAdminSession starts a session; it returns the cookie's token.
	CreateAdminSession(ctx context.Context, adminID int64, ttl time.Duration) (string, time.Time, error)
	// AdminBySession returns the operator of a live session. EUNAUTHENTICATED.
	AdminBySession(ctx context.Context, token string) (*seckill.Admin, error)
	// DeleteAdminSession ends a session.
	DeleteAdminSession(ctx context.Context, token string) error
}

// LiveCounter reads admission's live numbers (Redis).
type LiveCounter interface {
	LiveCounts(ctx context.Context, voucherIDs []int64) (map[int64]seckill.LiveCounts, error)
}

// Rooms reads the campaigns' waiting rooms (seckill.Rooms).
type Rooms interface {
	// Funnel counts a room's layers now. ENOTFOUND; ECONFLICT for a
	// campaign without a room.
	Funnel(ctx context.Context, voucherID int64) (seckill.RoomFunnel, error)
}

// DefaultSessionTTL is how long a session lasts.
const DefaultSessionTTL = 12 * time.Hour

// Config is the dashboard's dependencies and settings.
type Config struct {
	Campaigns Campaigns
	Orders    Orders
	Records   Records
	Sessions  Sessions
	Live      LiveCounter
	// Rooms shows a campaign's waiting room, when it has one; required.
	Rooms Rooms
	// Limiter bounds sign-in attempts; nil means an in-memory limiter with
	// DefaultLoginLimits (per process).
	Limiter LoginLimiter
	// LoginSlowDown is how long an attempt waits when its user name's
	// failures are over budget; 0 means DefaultLoginSlowDown.
	LoginSlowDown time.Duration
	// Refunds lists and retries refunds of payments owed back.
	Refunds Refunds
	// Events manages the endpoints and deliveries of order events; nil
	// answers its pages 404.
	Events Events
	// Currency is the payments' currency (SECKILL_PAYMENT_CURRENCY), in
	// which prices and revenue are shown.
	Currency string
	// Queues reads the job queues' figures; nil shows none.
	Queues Queues
	// History is the charts' history; nil draws no charts.
	History History
	// Monitor is the Asynq monitor, served at /admin/queues/ behind the
	// session (asynqmon with RootPath "/admin/queues"); nil answers 404.
	Monitor http.Handler
	// UserRate and UserBurst are the shared per-user purchase limit, shown
	// with each campaign's challenge and brake.
	UserRate  float64
	UserBurst int
	// AddressRate and AddressBurst are the shared per-address purchase
	// limit, shown beside it.
	AddressRate  float64
	AddressBurst int
	// ClientAddr finds a request's client address (sign-in limits); the
	// zero Resolver trusts no proxy.
	ClientAddr clientaddr.Resolver
	// SSO, when set, signs operators in through an identity provider too
	// (SSOName names it on the sign-in page), and ProviderAdmins keeps
	// them; both or neither.
	SSO            SSO
	SSOName        string
	ProviderAdmins ProviderAdmins
	// SessionTTL is how long a session lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	Logger     *slog.Logger
	Now        func() time.Time
}

// Handler serves the dashboard under /admin.
type Handler struct {
	cfg          Config
	signInPolicy string // the sign-in pages' Content-Security-Policy
	limiter      LoginLimiter
	logger       *slog.Logger
	next         http.Handler

	shardMu   sync.Mutex
	shardLast map[int64]shardSample // the last reading of each campaign's shards (campaign.go)
}

// New returns the dashboard's handler. Mount it at /admin and /admin/.
func New(cfg Config) *Handler {
	if cfg.Rooms == nil {
		panic("web: Config.Rooms is required")
	}
	if (cfg.SSO == nil) != (cfg.ProviderAdmins == nil) {
		panic("web: Config.SSO and Config.ProviderAdmins go together")
	}
	h := &Handler{cfg: cfg, limiter: cfg.Limiter, logger: cfg.Logger, signInPolicy: contentPolicy}
	if cfg.SSO != nil {
		h.signInPolicy = policyFormingTo(cfg.SSO.AuthorizationOrigin())
	}
	if h.cfg.SessionTTL <= 0 {
		h.cfg.SessionTTL = DefaultSessionTTL
	}
	if h.cfg.LoginSlowDown <= 0 {
		h.cfg.LoginSlowDown = DefaultLoginSlowDown
	}
	if h.limiter == nil {
		h.limiter = NewMemoryLimiter(DefaultLoginLimits)
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.cfg.Now == nil {
		h.cfg.Now = time.Now
	}
	if h.cfg.Currency == "" {
		h.cfg.Currency = seckill.DefaultCurrency
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/login", h.loginPage)
	mux.HandleFunc("POST /admin/login", h.login)
	mux.HandleFunc("POST /admin/logout", h.logout)
	if cfg.SSO != nil {
		mux.HandleFunc("POST "+ssoPath, h.ssoStart)
		mux.HandleFunc("GET "+ssoPath+"/callback", h.ssoCallback)
	}
	mux.Handle("GET /admin/static/", staticHandler())

	page := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, h.requireSession(pageHeaders(f))) }
	page("GET /admin", h.campaignsPage)
	page("GET /admin/{$}", h.campaignsPage)
	page("GET /admin/live/campaigns", h.campaignsFragment)
	page("GET /admin/campaigns/new", h.newCampaignForm)
	page("POST /admin/campaigns", h.createCampaign)
	page("GET /admin/campaigns/{id}", h.campaignPage)
	page("GET /admin/campaigns/{id}/live", h.campaignFragment)
	page("GET /admin/campaigns/{id}/edit", h.editCampaignForm)
	page("POST /admin/campaigns/{id}/edit", h.editCampaign)
	page("POST /admin/campaigns/{id}/pause", h.pauseCampaign)
	page("POST /admin/campaigns/{id}/resume", h.resumeCampaign)
	page("POST /admin/campaigns/{id}/end", h.endCampaign)
	page("POST /admin/campaigns/{id}/stock", h.addStock)
	page("POST /admin/campaigns/{id}/guard", h.updateGuard)
	page("POST /admin/campaigns/{id}/orders/{order}/cancel", h.cancelOrder)
	page("POST /admin/campaigns/{id}/refunds/{payment}/retry", h.retryRefund)
	page("GET /admin/campaigns/{id}/orders.csv", h.ordersCSV)
	page("GET /admin/campaigns/{id}/audit.csv", h.auditCSV)
	page("GET /admin/jobs", h.queuesPage)
	page("GET /admin/jobs/live", h.queuesFragment)
	page("GET /admin/events", h.eventsPage)
	page("POST /admin/events/endpoints", h.addEndpoint)
	page("GET /admin/events/endpoints/{id}", h.deliveriesPage)
	page("POST /admin/events/endpoints/{id}/enable", h.enableEndpoint)
	page("POST /admin/events/endpoints/{id}/disable", h.disableEndpoint)
	page("POST /admin/events/endpoints/{id}/delete", h.deleteEndpoint)
	page("POST /admin/events/endpoints/{id}/redeliver", h.redeliver)

	monitor := cfg.Monitor
	if monitor == nil {
		monitor = http.NotFoundHandler()
	}
	// asynqmon sees the full path (its RootPath is /admin/queues); its
	// own pages need inline scripts, so they get no content policy. Its
	// pages get a link back to the dashboard.
	mux.Handle("/admin/queues/", h.requireSession(frameHeaders(withBackLink(monitor))))
	mux.Handle("/admin/queues", h.requireSession(frameHeaders(http.RedirectHandler("/admin/queues/", http.StatusSeeOther))))
	// Anything else under /admin: sign in first, then 404.
	mux.Handle("/admin/", h.requireSession(pageHeaders(http.HandlerFunc(h.notFound))))

	h.next = http.NewCrossOriginProtection().Handler(limitBody(mux))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.next.ServeHTTP(w, r) }

// maxFormBytes bounds a form's body: the largest field (rules) is 4 KiB.
const maxFormBytes = 64 << 10

func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil && !isMonitor(r) {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		}
		next.ServeHTTP(w, r)
	})
}

func isMonitor(r *http.Request) bool {
	p := r.URL.Path
	return p == "/admin/queues" || len(p) > len("/admin/queues/") && p[:len("/admin/queues/")] == "/admin/queues/"
}

// contentPolicy lets the dashboard's pages load only their own files: no
// inline script, no inline style, nothing from another origin.
const contentPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// policyFormingTo is contentPolicy whose forms may also be answered with a
// redirect to origin (Chromium checks form-action on every redirect of a
// form's submission too).
func policyFormingTo(origin string) string {
	return strings.Replace(contentPolicy, "form-action 'self'", "form-action 'self' "+origin, 1)
}

func pageHeaders(next http.Handler) http.Handler { return headersWith(contentPolicy, next) }

// signInHeaders are the sign-in pages': their provider's button posts a
// form that is answered with a redirect to the provider.
func (h *Handler) signInHeaders(next http.Handler) http.Handler {
	return headersWith(h.signInPolicy, next)
}

func headersWith(policy string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", policy)
		hdr.Set("Cache-Control", "no-store")
		setCommonHeaders(hdr)
		next.ServeHTTP(w, r)
	})
}

func frameHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", "frame-ancestors 'none'")
		hdr.Set("Cache-Control", "no-store")
		setCommonHeaders(hdr)
		next.ServeHTTP(w, r)
	})
}

func setCommonHeaders(hdr http.Header) {
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "same-origin")
}

// render writes a component with a status; it renders into a buffer first so
// that a failure is a clean 500, not half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		h.logger.ErrorContext(r.Context(), "render page", "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// statusOf maps a domain error to an HTTP status, in one place; anything
// else is an internal error.
func statusOf(err error) int {
	if status, ok := statusOfCode[seckill.ErrorCode(err)]; ok {
		return status
	}
	return http.StatusInternalServerError
}

var statusOfCode = map[string]int{
	seckill.EINVALID:         http.StatusUnprocessableEntity,
	seckill.ENOTFOUND:        http.StatusNotFound,
	seckill.ECONFLICT:        http.StatusConflict,
	seckill.EUNAUTHENTICATED: http.StatusUnauthorized,
	seckill.EFORBIDDEN:       http.StatusForbidden,
	seckill.EUNAVAILABLE:     http.StatusServiceUnavailable,
}

// messageOf is what the operator reads about err; internal errors are logged
// once here and shown as "internal error".
func (h *Handler) messageOf(r *http.Request, err error) string {
	if seckill.ErrorCode(err) == seckill.EINTERNAL {
		h.logger.ErrorContext(r.Context(), "dashboard request", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return seckill.ErrorMessage(err)
}

// fail answers a request that cannot show its page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	msg := h.messageOf(r, err)
	h.render(w, r, statusOf(err), views.ErrorPage(h.meta(r, "Error", ""), msg))
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusNotFound, views.ErrorPage(h.meta(r, "Not found", ""), "There is no such page."))
}

// meta is the frame of a page for the signed-in operator.
func (h *Handler) meta(r *http.Request, title, nav string) views.Meta {
	m := views.Meta{Title: title, Nav: nav}
	if u := seckill.UserFromContext(r.Context()); u != nil {
		m.Admin = u.Name
	}
	return m
}

// pathID reads the {id} of a route: a canonical positive integer (no sign,
// no leading zero, as the API reads ids), else ENOTFOUND.
func pathID(r *http.Request) (int64, error) {
	id, err := seckill.ParseID("id", r.PathValue("id"))
	if err != nil {
		return 0, seckill.Errorf(seckill.ENOTFOUND, "campaign %q not found", r.PathValue("id"))
	}
	return id, nil
}
