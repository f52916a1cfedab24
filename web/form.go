package web

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// The create and edit forms. Every invalid field is reported at once, next
// to the field and in the words of its label; the domain's own validation
// decides what is invalid, and the service checks again.

// formFields are the inputs of the campaign form, named as the GraphQL
// input's fields so errors name the same field.
var formFields = []string{"title", "subTitle", "rules", "shopId", "stock", "payValue", "actualValue", "payWindow",
	"shards", "beginTimeLocal", "endTimeLocal", "challenge", "powBits", "brake", "quiz"}

// formLabels are the labels the form shows, by field.
var formLabels = map[string]string{
	"title": "Title", "subTitle": "Subtitle", "rules": "Rules", "shopId": "Shop id", "stock": "Stock",
	"payValue": "Pays", "actualValue": "Worth", "beginTime": "Begins", "endTime": "Ends", "payWindow": "Pay window",
	"shards": "Stock shards", "challenge": "Challenge", "powBits": "Proof of work: zero bits", "brake": "Brake", "quiz": "Quiz questions",
}

var fieldName = regexp.MustCompile(`\b(title|subTitle|rules|shopId|stock|payValue|actualValue|beginTime|endTime|payWindow|shards|challenge|powBits|brake|quiz)\b`)

// labelled rewrites a domain message, which names the API's fields, in the
// form's labels: "actualValue must be at least payValue" becomes
// "“Worth” must be at least “Pays”".
func labelled(msg string) string {
	return fieldName.ReplaceAllStringFunc(msg, func(f string) string { return "“" + formLabels[f] + "”" })
}

func (h *Handler) newCampaignForm(w http.ResponseWriter, r *http.Request) {
	now := h.cfg.Now().UTC().Truncate(time.Minute)
	p := views.FormPage{
		Meta: h.meta(r, "New campaign", views.NavCampaigns), Action: "/admin/campaigns",
		Values: map[string]string{"shopId": "1"},
		Begin:  now.Add(5 * time.Minute), End: now.Add(65 * time.Minute),
		Checks: formChecks(),
	}
	h.render(w, r, http.StatusOK, views.CampaignForm(p))
}

func (h *Handler) createCampaign(w http.ResponseWriter, r *http.Request) {
	p := views.FormPage{
		Meta: h.meta(r, "New campaign", views.NavCampaigns), Action: "/admin/campaigns",
		Values: formValues(r), Errors: map[string]string{}, Checks: formChecks(),
	}
	in := parseNewCampaign(r, &p)
	if len(p.Errors) > 0 {
		// What could be read is checked too: every error shows at once.
		addFieldErrors(p.Errors, in.Validate(h.cfg.Now()))
		h.formErrors(w, r, &p)
		return
	}
	v, err := h.cfg.Campaigns.AddSeckillVoucher(r.Context(), in)
	if err != nil {
		h.formError(w, r, &p, err)
		return
	}
	http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(v.ID, 10)+"?done=create", http.StatusSeeOther)
}

func (h *Handler) editCampaignForm(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pathCampaign(w, r)
	if !ok {
		return
	}
	id := v.ID
	if !h.cfg.Now().Before(v.Campaign.BeginTime) {
		h.renderCampaign(w, r, id, pageState{status: http.StatusConflict,
			err: "This campaign has started: it can only be paused, resumed, ended or given more stock."})
		return
	}
	p := h.editPage(r, v)
	p.Values["title"], p.Values["subTitle"], p.Values["rules"] = v.Title, v.SubTitle, v.Rules
	p.Begin, p.End = v.Campaign.BeginTime, v.Campaign.EndTime
	h.render(w, r, http.StatusOK, views.CampaignForm(p))
}

func (h *Handler) editCampaign(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pathCampaign(w, r)
	if !ok {
		return
	}
	id := v.ID
	p := h.editPage(r, v)
	p.Errors = map[string]string{}
	for _, f := range []string{"title", "subTitle", "rules", "beginTimeLocal", "endTimeLocal"} {
		p.Values[f] = r.PostFormValue(f)
	}
	e := seckill.CampaignEdit{Title: r.PostFormValue("title"), SubTitle: r.PostFormValue("subTitle"), Rules: r.PostFormValue("rules")}
	parseTimes(r, &p, &e.BeginTime, &e.EndTime)
	if len(p.Errors) > 0 {
		// The edit is checked as the campaign it would make, so that every
		// error shows at once.
		addFieldErrors(p.Errors, (&seckill.NewSeckillVoucher{
			ShopID: v.ShopID, Title: e.Title, SubTitle: e.SubTitle, Rules: e.Rules,
			PayValue: v.PayValue, ActualValue: v.ActualValue, Stock: max(v.Campaign.InitialStock, seckill.MinStock),
			BeginTime: e.BeginTime, EndTime: e.EndTime,
		}).Validate(h.cfg.Now()))
		h.formErrors(w, r, &p)
		return
	}
	_, err := h.cfg.Campaigns.UpdateCampaign(r.Context(), id, e)
	if err == nil {
		http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(id, 10)+"?done=edit", http.StatusSeeOther)
		return
	}
	if seckill.ErrorCode(err) == seckill.ECONFLICT {
		h.renderCampaign(w, r, id, pageState{status: http.StatusConflict, err: h.messageOf(r, err)})
		return
	}
	h.formError(w, r, &p, err)
}

func (h *Handler) editPage(r *http.Request, v *seckill.Voucher) views.FormPage {
	id := strconv.FormatInt(v.ID, 10)
	return views.FormPage{
		Meta: h.meta(r, "Edit "+v.Title, views.NavCampaigns), Action: "/admin/campaigns/" + id + "/edit",
		Edit: true, ID: v.ID, Checks: formChecks(),
		Values: map[string]string{
			"shopId":   strconv.FormatInt(v.ShopID, 10),
			"payValue": strconv.FormatInt(v.PayValue, 10), "actualValue": strconv.FormatInt(v.ActualValue, 10),
			"stock": strconv.FormatInt(v.Campaign.InitialStock, 10),
		},
	}
}

// formError shows the form again with the service's errors next to their
// fields, or above the form when they name none.
func (h *Handler) formError(w http.ResponseWriter, r *http.Request, p *views.FormPage, err error) {
	if len(seckill.AllFieldErrors(err)) > 0 {
		p.Errors = map[string]string{}
		addFieldErrors(p.Errors, err)
		h.formErrors(w, r, p)
		return
	}
	p.Error = h.messageOf(r, err)
	h.render(w, r, statusOf(err), views.CampaignForm(*p))
}

// formErrors shows the form again with every error next to its field and a
// summary above it.
func (h *Handler) formErrors(w http.ResponseWriter, r *http.Request, p *views.FormPage) {
	var names []string
	for _, f := range []string{"title", "subTitle", "rules", "beginTime", "endTime", "shopId", "stock", "payValue", "actualValue",
		"payWindow", "shards", "challenge", "powBits", "brake", "quiz"} {
		if p.Errors[f] != "" {
			names = append(names, formLabels[f])
			p.Invalid = append(p.Invalid, views.InvalidField{Name: f, Label: formLabels[f]})
		}
	}
	if len(names) == 1 {
		p.Error = "Check " + names[0] + "."
	} else {
		p.Error = "Check " + strconv.Itoa(len(names)) + " fields: " + strings.Join(names, ", ") + "."
	}
	h.render(w, r, http.StatusUnprocessableEntity, views.CampaignForm(*p))
}

func formValues(r *http.Request) map[string]string {
	vals := make(map[string]string, len(formFields))
	for _, f := range formFields {
		vals[f] = r.PostFormValue(f)
	}
	return vals
}

// addFieldErrors adds to errs every field error of err, in the form's
// words, but for the fields errs has already (they could not be read).
func addFieldErrors(errs map[string]string, err error) {
	for _, e := range seckill.AllFieldErrors(err) {
		if errs[e.Field] == "" {
			errs[e.Field] = labelled(e.Message)
		}
	}
}

// formChecks are the checks the browser makes before the form is sent (the
// server makes them again): their messages are the domain's, in the form's
// words, found by validating a campaign that fails only that check.
func formChecks() map[string]views.Check {
	now := time.Now()
	valid := seckill.NewSeckillVoucher{Title: "x", ShopID: 1, Stock: seckill.MinStock, BeginTime: now, EndTime: now.Add(time.Hour)}
	msg := func(change func(*seckill.NewSeckillVoucher)) string {
		in := valid
		change(&in)
		return labelled(seckill.ErrorMessage(in.Validate(now)))
	}
	return map[string]views.Check{
		"title":       {Required: msg(func(in *seckill.NewSeckillVoucher) { in.Title = "" })},
		"shopId":      {Min: 1, Max: -1, Message: msg(func(in *seckill.NewSeckillVoucher) { in.ShopID = 0 })},
		"stock":       {Min: seckill.MinStock, Max: seckill.MaxStock, Message: msg(func(in *seckill.NewSeckillVoucher) { in.Stock = 0 })},
		"payValue":    {Min: 0, Max: -1, Message: msg(func(in *seckill.NewSeckillVoucher) { in.PayValue = -1 })},
		"actualValue": {Min: 0, Max: -1, AtLeast: "payValue", Message: msg(func(in *seckill.NewSeckillVoucher) { in.PayValue, in.ActualValue = 2, 1 })},
	}
}

// parseNewCampaign reads the create form into the domain's input. What
// cannot be read (a number that is not one, a time that is not one) goes in
// p.Errors; the domain validates the rest.
func parseNewCampaign(r *http.Request, p *views.FormPage) seckill.NewSeckillVoucher {
	in := seckill.NewSeckillVoucher{
		Title: r.PostFormValue("title"), SubTitle: r.PostFormValue("subTitle"), Rules: r.PostFormValue("rules"),
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"shopId", &in.ShopID}, {"payValue", &in.PayValue}, {"actualValue", &in.ActualValue}, {"stock", &in.Stock}} {
		n, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue(f.name)), 10, 64)
		if err != nil {
			p.Errors[f.name] = "“" + formLabels[f.name] + "” must be a whole number"
			continue
		}
		*f.dst = n
	}
	// The pay window, in seconds, is optional: empty takes the server's
	// default.
	if s := strings.TrimSpace(r.PostFormValue("payWindow")); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil:
			p.Errors["payWindow"] = "“" + formLabels["payWindow"] + "” must be a whole number of seconds"
		case n <= 0 || n > int64(seckill.MaxPayWindow/time.Second):
			in.PayWindow = -1 // the domain refuses it, in its words
		default:
			in.PayWindow = time.Duration(n) * time.Second
		}
	}
	// Stock shards: empty is 1.
	var err error
	if in.Shards, err = formInt(r, "shards", 1); err != nil {
		p.Errors["shards"] = "“" + formLabels["shards"] + "” must be a whole number"
	}
	parseTimes(r, p, &in.BeginTime, &in.EndTime)
	parseGuard(r, p, &in)
	return in
}

// parseGuard reads the create form's challenge and brake. The proof of
// work's bits count only for PROOF_OF_WORK and the questions only for QUIZ:
// what the form holds for another kind is ignored.
func parseGuard(r *http.Request, p *views.FormPage, in *seckill.NewSeckillVoucher) {
	in.Challenge = seckill.ChallengeKind(strings.TrimSpace(r.PostFormValue("challenge")))
	var err error
	if in.Brake, err = formInt(r, "brake", 0); err != nil {
		p.Errors["brake"] = "“" + formLabels["brake"] + "” must be a whole number"
	}
	switch in.Challenge {
	case seckill.ChallengePoW:
		if in.PoWBits, err = formOptInt(r, "powBits"); err != nil {
			p.Errors["powBits"] = "“" + formLabels["powBits"] + "” must be a whole number"
		}
	case seckill.ChallengeQuiz:
		if in.Quiz, err = parseQuiz(r.PostFormValue("quiz")); err != nil {
			p.Errors["quiz"] = labelled(seckill.ErrorMessage(err))
		}
	}
}

// parseTimes reads beginTime and endTime: the UTC instant the script put in
// the hidden field, or else the visible datetime-local value read as UTC.
// A value that is not a time goes in p.Errors.
func parseTimes(r *http.Request, p *views.FormPage, begin, end *time.Time) {
	for _, f := range []struct {
		name string
		dst  *time.Time
		show *time.Time
	}{{"beginTime", begin, &p.Begin}, {"endTime", end, &p.End}} {
		t, ok := parseFormTime(r.PostFormValue(f.name), r.PostFormValue(f.name+"Local"))
		if !ok {
			p.Errors[f.name] = "“" + formLabels[f.name] + "” must be a date and time"
			continue
		}
		*f.dst, *f.show = t, t
	}
}

func parseFormTime(utcValue, local string) (time.Time, bool) {
	if s := strings.TrimSpace(utcValue); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t.UTC(), err == nil
	}
	s := strings.TrimSpace(local)
	if s == "" {
		return time.Time{}, true // the domain says it is required
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
