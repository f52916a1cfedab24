package web

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// Order events to the platform: the endpoints (add one with its own
// secret, shown once; enable, disable), each endpoint's deliveries (status,
// attempts, last answer; the dead ones), and redelivery of one event or a
// range.

// Events manages the endpoints and deliveries of order events
// (seckill.EventAdmin).
type Events interface {
	// AddEndpoint adds an enabled endpoint. EINVALID (url, secret): the
	// endpoint policy refuses the URL.
	AddEndpoint(ctx context.Context, url, secret string) (seckill.Endpoint, error)
	// SetEndpointEnabled enables or disables an endpoint (the
	// environment's too). ENOTFOUND.
	SetEndpointEnabled(ctx context.Context, id int64, enabled bool) error
	// DeleteEndpoint deletes a disabled endpoint and its deliveries.
	// ECONFLICT while enabled, ENOTFOUND.
	DeleteEndpoint(ctx context.Context, id int64) error
	// Endpoints returns every endpoint, oldest first.
	Endpoints(ctx context.Context) ([]seckill.Endpoint, error)
	// Deliveries lists an endpoint's deliveries, newest first.
	Deliveries(ctx context.Context, f seckill.DeliveryFilter) ([]seckill.Delivery, error)
	// Redeliver makes matching deliveries due again. EINVALID.
	Redeliver(ctx context.Context, f seckill.RedeliverFilter) (int, error)
	// EventStats counts an endpoint's deliveries.
	EventStats(ctx context.Context, endpointID int64) (seckill.EventStats, error)
}

// deliveriesShown bounds the deliveries an endpoint's page lists.
const deliveriesShown = 100

// newSecret is a fresh endpoint secret: 130 random bits.
func newSecret() string { return "whsec_" + rand.Text() }

func (h *Handler) eventsPage(w http.ResponseWriter, r *http.Request) {
	h.renderEvents(w, r, http.StatusOK, views.EventsPage{})
}

// renderEvents renders the endpoints page with p's message fields.
func (h *Handler) renderEvents(w http.ResponseWriter, r *http.Request, status int, p views.EventsPage) {
	if h.cfg.Events == nil {
		h.notFound(w, r)
		return
	}
	p.Meta = h.meta(r, "Events", views.NavEvents)
	eps, err := h.cfg.Events.Endpoints(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, e := range eps {
		st, err := h.cfg.Events.EventStats(r.Context(), e.ID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		// Never a password of the URL, never a receiver's answer: what
		// an endpoint reaches would be read through this page.
		row := views.EndpointRow{ID: e.ID, URL: seckill.RedactURL(e.URL), Source: e.Source, Enabled: e.Enabled, Failures: e.Failures,
			NextAttempt: e.NextAttempt, LastError: seckill.ShownEndpointError(e.LastError), LastSuccess: e.LastSuccess,
			Pending: st.Pending, Dead: st.Dead, Delivered: st.Delivered, Oldest: st.Oldest,
			Link: endpointURL(e.ID, "")}
		// The environment's endpoint too: instances without
		// SECKILL_EVENTS_WEBHOOK_URL never withdraw it, an operator does
		// (and an instance that has the variable declares it again when
		// it starts).
		action := "enable"
		if e.Enabled {
			action = "disable"
		}
		row.Toggle, row.ToggleText = endpointURL(e.ID, "/"+action), action
		if !e.Enabled {
			row.Delete = endpointURL(e.ID, "/delete")
		}
		p.Rows = append(p.Rows, row)
	}
	h.render(w, r, status, views.Events(p))
}

func endpointURL(id int64, rest string) string {
	return "/admin/events/endpoints/" + strconv.FormatInt(id, 10) + rest
}

// addEndpoint adds an endpoint with a fresh secret and shows the secret
// once, on the page it answers (never in a URL).
func (h *Handler) addEndpoint(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Events == nil {
		h.notFound(w, r)
		return
	}
	raw := r.PostFormValue("url")
	secret := newSecret()
	e, err := h.cfg.Events.AddEndpoint(r.Context(), raw, secret)
	if err != nil {
		h.renderEvents(w, r, statusOf(err), views.EventsPage{Error: h.messageOf(r, err), URL: seckill.RedactURL(raw)})
		return
	}
	h.logger.InfoContext(r.Context(), "event endpoint added", "endpoint_id", e.ID, "admin", h.meta(r, "", "").Admin)
	h.renderEvents(w, r, http.StatusCreated, views.EventsPage{NewID: e.ID, NewURL: seckill.RedactURL(e.URL), NewSecret: secret})
}

func (h *Handler) enableEndpoint(w http.ResponseWriter, r *http.Request)  { h.setEndpoint(w, r, true) }
func (h *Handler) disableEndpoint(w http.ResponseWriter, r *http.Request) { h.setEndpoint(w, r, false) }

func (h *Handler) setEndpoint(w http.ResponseWriter, r *http.Request, enabled bool) {
	if h.cfg.Events == nil {
		h.notFound(w, r)
		return
	}
	id, err := endpointID(r)
	if err == nil {
		err = h.cfg.Events.SetEndpointEnabled(r.Context(), id, enabled)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.InfoContext(r.Context(), "event endpoint set", "endpoint_id", id, "enabled", enabled, "admin", h.meta(r, "", "").Admin)
	http.Redirect(w, r, "/admin/events", http.StatusSeeOther)
}

// deleteEndpoint deletes a disabled endpoint (the environment's too), with
// its deliveries.
func (h *Handler) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Events == nil {
		h.notFound(w, r)
		return
	}
	id, err := endpointID(r)
	if err == nil {
		err = h.cfg.Events.DeleteEndpoint(r.Context(), id)
	}
	if err != nil {
		h.renderEvents(w, r, statusOf(err), views.EventsPage{Error: h.messageOf(r, err)})
		return
	}
	h.logger.InfoContext(r.Context(), "event endpoint deleted", "endpoint_id", id, "admin", h.meta(r, "", "").Admin)
	http.Redirect(w, r, "/admin/events", http.StatusSeeOther)
}

// endpointID reads the {id} of an endpoint's route. ENOTFOUND.
func endpointID(r *http.Request) (int64, error) {
	id, err := seckill.ParseID("id", r.PathValue("id"))
	if err != nil {
		return 0, seckill.Errorf(seckill.ENOTFOUND, "endpoint %q not found", r.PathValue("id"))
	}
	return id, nil
}

// endpoint finds an endpoint by its route's id. ENOTFOUND.
func (h *Handler) endpoint(r *http.Request) (seckill.Endpoint, error) {
	id, err := endpointID(r)
	if err != nil {
		return seckill.Endpoint{}, err
	}
	eps, err := h.cfg.Events.Endpoints(r.Context())
	if err != nil {
		return seckill.Endpoint{}, err
	}
	for _, e := range eps {
		if e.ID == id {
			return e, nil
		}
	}
	return seckill.Endpoint{}, seckill.Errorf(seckill.ENOTFOUND, "endpoint %d not found", id)
}

// deliveriesPage lists an endpoint's deliveries: every state, or only
// pending, delivered or dead ones; of one order, when asked.
func (h *Handler) deliveriesPage(w http.ResponseWriter, r *http.Request) {
	h.renderDeliveries(w, r, http.StatusOK, "")
}

func (h *Handler) renderDeliveries(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if h.cfg.Events == nil {
		h.notFound(w, r)
		return
	}
	e, err := h.endpoint(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	state := seckill.DeliveryState(q.Get("state"))
	switch state {
	case "", seckill.DeliveryPending, seckill.DeliveryDelivered, seckill.DeliveryDead:
	default:
		state = ""
	}
	var orderID int64
	if s := q.Get("order"); s != "" {
		orderID, _ = strconv.ParseInt(s, 10, 64)
	}
	ds, err := h.cfg.Events.Deliveries(r.Context(), seckill.DeliveryFilter{EndpointID: e.ID, State: state, OrderID: orderID, Limit: deliveriesShown + 1})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := views.DeliveriesPage{Meta: h.meta(r, "Deliveries", views.NavEvents), EndpointID: e.ID, URL: seckill.RedactURL(e.URL),
		State: string(state), Order: q.Get("order"), Redeliver: endpointURL(e.ID, "/redeliver"), Error: msg}
	if n := q.Get("redelivered"); n != "" {
		p.Done = n + " redelivered: they are sent again, in order per order, within moments."
	}
	if len(ds) > deliveriesShown {
		ds, p.More = ds[:deliveriesShown], true
	}
	for _, s := range []seckill.DeliveryState{"", seckill.DeliveryPending, seckill.DeliveryDead, seckill.DeliveryDelivered} {
		v := url.Values{}
		if s != "" {
			v.Set("state", string(s))
		}
		link := endpointURL(e.ID, "")
		if len(v) > 0 {
			link += "?" + v.Encode()
		}
		p.Filters = append(p.Filters, views.Filter{Text: filterText(s), URL: link, Current: s == state})
	}
	for _, d := range ds {
		p.Rows = append(p.Rows, views.DeliveryRow{ID: d.ID, Type: string(d.Type), OrderID: d.OrderID, Sequence: d.Sequence,
			OccurredAt: d.OccurredAt, State: string(d.State()), Attempts: d.Attempts, NextAttempt: d.NextAttempt,
			LastAttempt: d.LastAttempt, LastStatus: d.LastStatus, LastAnswer: seckill.ShownAnswer(d.LastStatus, d.LastAnswer)})
	}
	h.render(w, r, status, views.Deliveries(p))
}

func filterText(s seckill.DeliveryState) string {
	switch s {
	case seckill.DeliveryPending:
		return "Pending"
	case seckill.DeliveryDead:
		return "Dead"
	case seckill.DeliveryDelivered:
		return "Delivered"
	}
	return "All"
}

// redeliver makes one event (order and sequence), an order's events, or
// the events of a time range (UTC, from the form's datetime-local fields)
// due again, dead only when asked, and goes back to the list.
func (h *Handler) redeliver(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Events == nil {
		h.notFound(w, r)
		return
	}
	e, err := h.endpoint(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := seckill.RedeliverFilter{EndpointID: e.ID, DeadOnly: r.PostFormValue("dead") != ""}
	if s := r.PostFormValue("order"); s != "" {
		if f.OrderID, err = strconv.ParseInt(s, 10, 64); err != nil || f.OrderID <= 0 {
			err = seckill.Invalidf("order", "the order must be an order id")
		}
	}
	if s := r.PostFormValue("sequence"); s != "" && err == nil {
		if f.Sequence, err = strconv.Atoi(s); err != nil || f.Sequence <= 0 {
			err = seckill.Invalidf("sequence", "the sequence must be a positive number")
		}
	}
	if f.OrderID == 0 && err == nil {
		f.From, err = formTime(r.PostFormValue("from"), "from")
		if err == nil {
			f.To, err = formTime(r.PostFormValue("to"), "to")
		}
	}
	n := 0
	if err == nil {
		n, err = h.cfg.Events.Redeliver(r.Context(), f)
	}
	if err != nil {
		h.renderDeliveries(w, r, statusOf(err), h.messageOf(r, err))
		return
	}
	h.logger.InfoContext(r.Context(), "events redelivered", "endpoint_id", e.ID, "count", n, "order_id", f.OrderID,
		"sequence", f.Sequence, "from", f.From, "to", f.To, "dead_only", f.DeadOnly, "admin", h.meta(r, "", "").Admin)
	http.Redirect(w, r, endpointURL(e.ID, "?redelivered="+strconv.Itoa(n)), http.StatusSeeOther)
}

// formTime reads a datetime-local field, in UTC.
func formTime(s, field string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, seckill.Invalidf(field, "give a time as 2026-12-01T10:00 (UTC)")
}
