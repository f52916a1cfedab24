package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/gqlclient"
)

// controlClient sends the few GraphQL requests around a run: preflight,
// campaign creation, voucher state. Its errors are written for the person
// running the bench.
type controlClient struct {
	endpoint string
	http     *http.Client
	admin    string // the admin's token
}

func newControlClient(endpoint, adminToken string) *controlClient {
	return &controlClient{
		endpoint: endpoint,
		http:     &http.Client{Timeout: 15 * time.Second, Transport: load.NewTransport(4)},
		admin:    adminToken,
	}
}

// answerError is a GraphQL error answer; Code is its extensions.code.
type answerError struct {
	endpoint, msg, Code string
}

func (e *answerError) Error() string { return e.endpoint + ": " + e.msg }

// do runs one GraphQL operation as admin and decodes data into out.
func (c *controlClient) do(ctx context.Context, query string, vars map[string]any, out any) error {
	return c.doAs(ctx, c.admin, query, vars, out)
}

// doAs runs one GraphQL operation with token and decodes data into out.
func (c *controlClient) doAs(ctx context.Context, token, query string, vars map[string]any, out any) error {
	r, err := gqlclient.Post(ctx, c.http, c.endpoint, token, query, vars, 8<<20)
	if errors.Is(err, gqlclient.ErrRequest) {
		return fmt.Errorf("bad --url %q: %w", c.endpoint, err)
	} else if err != nil {
		return reachError(c.endpoint, err)
	}
	if r.NotJSON != nil || (r.Data == nil && r.Errors == nil) {
		return fmt.Errorf("%s answered %s with %s: not a GraphQL endpoint (the default is %s)",
			c.endpoint, r.Status, describeBody(r.ContentType, r.Body), DefaultURL)
	}
	if len(r.Errors) > 0 {
		e := r.Errors[0]
		switch e.Extensions.Code {
		case "UNAUTHENTICATED":
			return fmt.Errorf("the server at %s rejected the bench's tokens (%s): the bench signs them with "+
				"SECKILL_JWT_SECRET and SECKILL_JWT_ISSUER, which must be the server's", c.endpoint, e.Message)
		case "FORBIDDEN":
			return fmt.Errorf("the server at %s refused the bench's admin token (%s)", c.endpoint, e.Message)
		}
		msg := e.Message
		if e.Extensions.Code != "" {
			msg += " (" + e.Extensions.Code + ")"
		}
		if e.Extensions.Field != "" {
			msg += " [field " + e.Extensions.Field + "]"
		}
		return &answerError{endpoint: c.endpoint, msg: msg, Code: e.Extensions.Code}
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", c.endpoint, r.Status)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return fmt.Errorf("%s: unexpected answer %s: %w", c.endpoint, load.Snippet(r.Data), err)
		}
	}
	return nil
}

func describeBody(contentType string, data []byte) string {
	if len(bytes.TrimSpace(data)) == 0 {
		return "an empty body"
	}
	if contentType == "" {
		contentType = http.DetectContentType(data)
	}
	return fmt.Sprintf("%q (%s)", load.Snippet(data), contentType)
}

// reachError explains a request that got no answer.
func reachError(endpoint string, err error) error {
	kind := load.ErrorKind(err)
	switch kind {
	case "connection refused":
		return fmt.Errorf("cannot reach %s: connection refused; is `seckill serve` running?", endpoint)
	case "timeout":
		return fmt.Errorf("cannot reach %s: no answer in time; is `seckill serve` running and healthy?", endpoint)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot reach %s: unknown host %q", endpoint, dnsErr.Name)
	}
	return fmt.Errorf("cannot reach %s: %w", endpoint, err)
}

// preflight checks that endpoint is a seckill GraphQL server that accepts
// the bench's tokens.
func (c *controlClient) preflight(ctx context.Context) error {
	var out struct {
		Typename string `json:"__typename"`
	}
	if err := c.do(ctx, `query { __typename }`, nil, &out); err != nil {
		return err
	}
	// A query needs no token; ask for something that does.
	var orders struct {
		MyOrders []struct{ ID string } `json:"myOrders"`
	}
	return c.do(ctx, `query { myOrders { id } }`, nil, &orders)
}

// campaignState is a voucher's campaign as the GraphQL API shows it.
type campaignState struct {
	Stock     int64  `json:"stock"`     // every unit ever put on sale
	Remaining int64  `json:"remaining"` // live count in Redis
	Sold      int64  `json:"sold"`      // orders persisted in Postgres
	Status    string `json:"status"`
}

// createCampaign creates a voucher on sale from a minute ago for ttl, and
// returns its id.
func (c *controlClient) createCampaign(ctx context.Context, stock int64, ttl time.Duration, extra map[string]any) (int64, error) {
	now := time.Now().UTC()
	var out struct {
		AddSeckillVoucher struct {
			ID string `json:"id"`
		} `json:"addSeckillVoucher"`
	}
	input := map[string]any{
		"shopId":      "1",
		"title":       "seckill bench " + now.Format(time.RFC3339),
		"payValue":    100,
		"actualValue": 200,
		"stock":       stock,
		"beginTime":   now.Add(-time.Minute).Format(time.RFC3339),
		"endTime":     now.Add(ttl).Format(time.RFC3339),
	}
	maps.Copy(input, extra)
	err := c.do(ctx, `mutation Add($input: AddSeckillVoucherInput!) { addSeckillVoucher(input: $input) { id } }`,
		map[string]any{"input": input}, &out)
	if err != nil {
		return 0, fmt.Errorf("create campaign: %w", err)
	}
	id, err := strconv.ParseInt(out.AddSeckillVoucher.ID, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("create campaign: voucher id %q", out.AddSeckillVoucher.ID)
	}
	return id, nil
}

// campaign reads a voucher's campaign.
func (c *controlClient) campaign(ctx context.Context, voucherID int64) (campaignState, error) {
	var out struct {
		Voucher *struct {
			Seckill *campaignState `json:"seckill"`
		} `json:"voucher"`
	}
	err := c.do(ctx, `query V($id: ID!) { voucher(id: $id) { seckill { stock remaining sold status } } }`,
		map[string]any{"id": strconv.FormatInt(voucherID, 10)}, &out)
	if err != nil {
		return campaignState{}, err
	}
	if out.Voucher == nil {
		return campaignState{}, fmt.Errorf("voucher %d does not exist", voucherID)
	}
	if out.Voucher.Seckill == nil {
		return campaignState{}, fmt.Errorf("voucher %d is not a seckill voucher", voucherID)
	}
	return *out.Voucher.Seckill, nil
}

// metricsURL returns the /metrics URL next to a GraphQL endpoint.
func metricsURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	u.Path, u.RawQuery = "/metrics", ""
	return u.String()
}
