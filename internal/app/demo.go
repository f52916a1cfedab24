package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/config"
	"seckill/internal/gqlclient"
)

// DemoOptions says what campaign Demo creates and for whom.
type DemoOptions struct {
	// URL is the running server, e.g. http://localhost:8080; empty means
	// the configured SECKILL_HTTP_ADDR on this machine.
	URL string
	// Stock is how many units the campaign sells.
	Stock int
	// Duration is how long the sale stays open from now.
	Duration time.Duration
	// Buyer is the user id of the printed token.
	Buyer int64
}

// Demo creates a campaign that is on sale from now on, through the running
// server's GraphQL API as an admin (user 1), and writes to out a shell
// script that uses it as a buyer: buy one unit, query the order, and a
// playground link that follows it by subscription; and a link to the sale
// page as a second buyer. The script holds the
// real ids and a real token, so it works as printed, on any day: paste it
// into a shell or pipe it to sh. Tokens are signed with cfg's secret, so
// the server must share it (in development: SECKILL_ENV=dev for both).
func Demo(ctx context.Context, cfg *config.Config, opts DemoOptions, out io.Writer) error {
	base, err := serverURL("demo", cfg, opts.URL)
	if err != nil {
		return err
	}
	if opts.Stock < 1 || opts.Duration <= 0 || opts.Buyer < 1 {
		return errors.New("demo: --stock, --duration and --buyer must be positive")
	}
	tokens := auth.NewTokens([]byte(cfg.JWTSecret), cfg.JWTIssuer)
	admin, err := tokens.Issue(1, true, 10*time.Minute)
	if err != nil {
		return err
	}
	buyer, err := tokens.Issue(opts.Buyer, false, 24*time.Hour)
	if err != nil {
		return err
	}
	// The sale page's buyer is another one, so that the script's purchase
	// does not make the page say ALREADY_PURCHASED.
	pageBuyer, err := tokens.Issue(opts.Buyer+1, false, 24*time.Hour)
	if err != nil {
		return err
	}

	begin := time.Now().UTC().Truncate(time.Second)
	end := begin.Add(opts.Duration)
	title := "Demo sale " + begin.Format("2006-01-02 15:04:05Z")
	var created struct {
		AddSeckillVoucher struct{ ID string } `json:"addSeckillVoucher"`
	}
	err = demoGraphQL(ctx, base.String()+"/graphql", admin, `mutation($in: AddSeckillVoucherInput!) {
  addSeckillVoucher(input: $in) { id }
}`, map[string]any{"in": map[string]any{
		"shopId": "1", "title": title, "payValue": 100, "actualValue": 200, "stock": opts.Stock,
		"beginTime": begin.Format(time.RFC3339), "endTime": end.Format(time.RFC3339),
	}}, &created)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	writeDemoScript(out, base.String(), created.AddSeckillVoucher.ID, title, opts, end, buyer, pageBuyer)
	return nil
}

// serverURL reads a command's --url: a running server's base URL, by
// default SECKILL_HTTP_ADDR on this machine.
func serverURL(cmd string, cfg *config.Config, raw string) (*url.URL, error) {
	if raw == "" {
		raw = "http://" + localAddr(cfg.HTTPAddr)
	}
	base, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%s: --url must be the server's http:// or https:// address, not %q", cmd, raw)
	}
	return base, nil
}

// demoGraphQL posts one operation and decodes its data into data; a GraphQL
// error or an unexpected answer is an error, which the caller prefixes with
// its command.
func demoGraphQL(ctx context.Context, endpoint, token, query string, vars map[string]any, data any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	answer, err := gqlclient.Post(ctx, http.DefaultClient, endpoint, token, query, vars, 1<<20)
	switch {
	case errors.Is(err, gqlclient.ErrRequest):
		return err
	case err != nil:
		return fmt.Errorf("is the server running (make run)? %w", err)
	case answer.NotJSON != nil:
		return fmt.Errorf("%s answered %s, not GraphQL: %w", endpoint, answer.Status, answer.NotJSON)
	}
	if len(answer.Errors) > 0 {
		e := answer.Errors[0]
		hint := ""
		if e.Extensions.Code == "UNAUTHENTICATED" {
			hint = " (the server signs tokens with another secret: give demo the same SECKILL_ENV and SECKILL_JWT_SECRET)"
		}
		return fmt.Errorf("the server refused: %s [%s]%s", e.Message, e.Extensions.Code, hint)
	}
	return json.Unmarshal(answer.Data, data)
}

func writeDemoScript(w io.Writer, base, voucher, title string, opts DemoOptions, end time.Time, token, pageToken string) {
	post := func(body string) string {
		return `curl -s "$URL" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d ` + body
	}
	buy, _ := json.Marshal(map[string]any{
		"query": `mutation { seckill(voucherId: "` + voucher + `") { outcome orderId message } }`})
	// The order id is known only once the purchase answers: the
	// script splices $ORDER into the JSON.
	const mark = "ORDER_ID"
	order, _ := json.Marshal(map[string]any{
		"query":     `query($id: ID!) { order(id: $id) { id status createdAt } myOrders { id status } }`,
		"variables": map[string]string{"id": mark}})
	before, after, _ := strings.Cut(string(order), mark)
	headers, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + token})
	follow := "headers=" + url.QueryEscape(string(headers)) +
		"&query=" + url.QueryEscape(`subscription($order: ID!) { orderStatus(orderId: $order) { status at reason } }`) +
		"&variables=" + url.QueryEscape(`{"order":"`)

	fmt.Fprintf(w, `# seckill demo: campaign %[1]s, %[2]q, sells %[3]d units from now until %[4]s.
# These commands buy one unit as user %[5]d, query the order, and print a
# playground link that follows it live. Paste them into a shell, or run
# them all at once: SECKILL_ENV=dev ./bin/seckill demo | sh
URL=%[6]s
TOKEN=%[7]s

# Buy: ACCEPTED, with the new order's id.
ANSWER=$(%[8]s)
echo "$ANSWER"
ORDER=$(echo "$ANSWER" | sed -n 's/.*"orderId":"\([0-9]*\)".*/\1/p')

# The order: QUEUED until a worker writes it to Postgres, then CREATED.
sleep 1
%[9]s
echo

# Follow the order by subscription (WebSocket) in the playground:
echo "%[10]s/playground#%[11]s$ORDER%[12]s"

# Buy as user %[14]d on the sale page, in a browser (the token is in the
# fragment, which the browser never sends to a server):
echo "%[10]s/sale/%[1]s#token=%[13]s"
`, voucher, title, opts.Stock, end.Format(time.RFC3339), opts.Buyer,
		shellQuote(base+"/graphql"), shellQuote(token),
		post(shellQuote(string(buy))),
		post(shellQuote(before)+`"$ORDER"`+shellQuote(after)),
		base, follow, url.QueryEscape(`"}`), pageToken, opts.Buyer+1)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// localAddr turns a listen address such as ":8080" or "0.0.0.0:8080" into
// one a client on this machine can dial, such as "localhost:8080".
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
