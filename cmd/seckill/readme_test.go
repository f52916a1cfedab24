package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/config"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

// runAsSeckill, set in the environment, makes the test binary behave as the
// seckill command, so that the README's shell examples can run
// ./bin/seckill without a separate build.
const runAsSeckill = "SECKILL_TEST_RUN_AS_SECKILL"

func TestMain(m *testing.M) {
	if os.Getenv(runAsSeckill) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestREADMEExamples starts `seckill serve` as `make run` does, then runs
// every sh block of the README's "Try it" section, in order, in one bash
// from a plain environment (no SECKILL_* variable but the address), and
// the commands the server's banner prints: all must work as printed.
func TestREADMEExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's examples need %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(readme), "## Try it")
	srv := startServer(t)

	// The examples replace "localhost:8080" with the test server; the demo
	// finds it through SECKILL_HTTP_ADDR, as it would a server on another
	// port.
	var out bytes.Buffer
	for i, b := range blocks {
		b = strings.ReplaceAll(b, "localhost:8080", srv.addr)
		fmt.Fprintf(&out, "### block %d\n", i+1)
		o := srv.shell(t, b)
		out.WriteString(o)
	}
	text := out.String()
	t.Logf("the README's examples printed:\n%s", text)
	if strings.Contains(text, `"errors"`) {
		t.Errorf("an example answered with errors")
	}
	// demo: the commands, then (| sh) a purchase, the order, a link.
	for _, want := range []string{
		"# seckill demo: campaign 1,", "ANSWER=$(curl", // the commands
		`"outcome":"ACCEPTED"`, `"myOrders":[{"id":"`, "/playground#headers=", // run by sh
		`"vouchers":[{"id":"1"`, `{"id":"2"`, // the token block's query, as an admin
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the examples' output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`"order":\{"id":"\d+","status":"(QUEUED|CREATED)"`).MatchString(text) {
		t.Errorf("the demo's order query did not show the order")
	}
	// The playground link follows the order that was bought.
	links := regexp.MustCompile(`http://\S+/playground#\S+`).FindAllString(text, -1)
	link := ""
	if len(links) > 0 {
		link = links[len(links)-1] // the one sh printed, with the order id
	}
	order := regexp.MustCompile(`"orderId":"(\d+)"`).FindStringSubmatch(text)
	if link == "" || order == nil {
		t.Fatalf("no playground link or order id in the output")
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	frag, err := url.ParseQuery(u.Fragment)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(frag.Get("query"), "subscription") || frag.Get("variables") != `{"order":"`+order[1]+`"}` ||
		!strings.HasPrefix(frag.Get("headers"), `{"Authorization":"Bearer ey`) {
		t.Errorf("playground link fragment %q", frag)
	}
	if res, err := http.Get(link); err != nil || res.StatusCode == http.StatusNotFound {
		t.Errorf("GET %s: %v %v", link, res, err)
	}

	// The sale page's link: a campaign, and a token in the fragment.
	sale := regexp.MustCompile(`http://\S+/sale/\d+#token=ey\S+`).FindAllString(text, -1)
	if len(sale) == 0 {
		t.Errorf("no sale page link in the output")
	} else if res, err := http.Get(sale[len(sale)-1]); err != nil || res.StatusCode == http.StatusNotFound {
		t.Errorf("GET %s: %v %v", sale[len(sale)-1], res, err)
	}

	// The banner's commands, as printed.
	cmds := map[string]string{}
	for _, line := range strings.Split(srv.banner(t), "\n") {
		for _, label := range []string{"More tokens", "A sale to try", "Pay an order"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label); ok {
				cmd, _, _ := strings.Cut(strings.TrimSpace(rest), "   ")
				cmds[label] = cmd
			}
		}
	}
	if len(cmds) != 3 {
		t.Fatalf("the banner lacks its commands:\n%s", srv.banner(t))
	}
	token := strings.TrimSpace(srv.shell(t, cmds["More tokens"]))
	var me struct {
		Data   struct{ MyOrders []any }
		Errors []any
	}
	srv.graphql(t, token, `{ myOrders { id } }`, &me)
	if len(me.Errors) > 0 {
		t.Errorf("the banner's token command (%s) made a token the server refuses: %v", cmds["More tokens"], me.Errors)
	}
	o := srv.shell(t, cmds["A sale to try"]+" | sh")
	if !strings.Contains(o, `"outcome":"ACCEPTED"`) {
		t.Errorf("the banner's demo command (%s) printed:\n%s", cmds["A sale to try"], o)
	}
	// The banner's payment command pays the demo's order, showing the
	// amount as the dashboard does; a second time it says why it sends
	// nothing.
	bought := regexp.MustCompile(`"orderId":"([0-9]+)"`).FindStringSubmatch(o)
	if bought == nil {
		t.Fatalf("the demo bought nothing:\n%s", o)
	}
	pay := strings.Replace(cmds["Pay an order"], "ORDER_ID", bought[1], 1)
	if o := srv.shell(t, pay); !strings.Contains(o, ": 1.00 CNY, PENDING, pay by ") || !strings.Contains(o, `"status":"applied","result":"SUCCEEDED"`) {
		t.Errorf("the banner's payment command (%s) printed:\n%s", pay, o)
	}
	if o, err := srv.shellErr(pay); err == nil || !strings.Contains(o, "nothing sent") || !strings.Contains(o, "PAID already [CONFLICT]") {
		t.Errorf("paying a paid order again (%s): %v\n%s", pay, err, o)
	}
}

// TestAPIOperations runs the operations of docs/api.md's "Buy, follow,
// pay and cancel", with the variables its comment gives, against a served
// binary: an admin creates a campaign, a user buys, reads, pays and cancels
// the order. The whole document, the subscription included, must validate
// for any of them to run.
func TestAPIOperations(t *testing.T) {
	api, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(t, "docs/api.md", string(api), "## Buy, follow, pay and cancel", "graphql")
	if len(blocks) != 1 {
		t.Fatalf("want one graphql block, found %d", len(blocks))
	}
	doc := blocks[0]
	_, vars, ok := strings.Cut(doc, "# variables:")
	if !ok {
		t.Fatal("the graphql block gives no variables")
	}
	vars, _, _ = strings.Cut(vars, "\n\n")
	now := time.Now().UTC()
	vars = strings.NewReplacer("\n#", "", "<now>", now.Format(time.RFC3339),
		"<in an hour>", now.Add(time.Hour).Format(time.RFC3339)).Replace(vars)
	var createVars map[string]any
	if err := json.Unmarshal([]byte(vars), &createVars); err != nil {
		t.Fatalf("the variables %s: %v", vars, err)
	}

	srv := startServer(t)
	tokens := auth.NewTokens([]byte(config.DevJWTSecret), "seckill")
	admin, _ := tokens.Issue(1, true, time.Hour)
	user, _ := tokens.Issue(2002, false, time.Hour)
	run := func(token, op string, vars map[string]any, data any) {
		t.Helper()
		var res struct {
			Data   json.RawMessage
			Errors []any
		}
		srv.post(t, token, map[string]any{"query": doc, "operationName": op, "variables": vars}, &res)
		if len(res.Errors) > 0 {
			t.Fatalf("%s: %v", op, res.Errors)
		}
		if err := json.Unmarshal(res.Data, data); err != nil {
			t.Fatal(err)
		}
	}
	var created struct{ AddSeckillVoucher struct{ ID string } }
	run(admin, "Create", createVars, &created)
	var bought struct {
		Seckill struct{ Outcome, OrderID string }
	}
	run(user, "Buy", map[string]any{"voucher": created.AddSeckillVoucher.ID}, &bought)
	if bought.Seckill.Outcome != "ACCEPTED" {
		t.Fatalf("Buy: %+v", bought)
	}
	// QUEUED at first; listed in myOrders once a worker has written it.
	var order struct {
		Order    struct{ Status string }
		MyOrders []struct{ ID string }
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		run(user, "Order", map[string]any{"order": bought.Seckill.OrderID}, &order)
		if order.Order.Status == "CREATED" && len(order.MyOrders) == 1 && order.MyOrders[0].ID == bought.Seckill.OrderID {
			break
		}
		if order.Order.Status != "QUEUED" || time.Now().After(deadline) {
			t.Fatalf("Order: %+v, want the order %s CREATED", order, bought.Seckill.OrderID)
		}
	}
	// CREATED awaits payment: the buyer may pay, or cancel.
	var paying struct {
		CreatePayment struct {
			ID, Currency, Status string
			Amount               int
		}
	}
	run(user, "Pay", map[string]any{"order": bought.Seckill.OrderID}, &paying)
	if p := paying.CreatePayment; p.ID == "" || p.Amount != 100 || p.Currency != "CNY" || p.Status != "PENDING" {
		t.Fatalf("Pay: %+v", paying)
	}
	var cancelled struct{ CancelOrder struct{ Status string } }
	run(user, "Cancel", map[string]any{"order": bought.Seckill.OrderID}, &cancelled)
	if cancelled.CancelOrder.Status != "CANCELLED" {
		t.Fatalf("Cancel: %+v", cancelled)
	}
}

// shellBlocks returns the ```sh blocks of the README section that starts
// with heading.
func shellBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	return fencedBlocks(t, "README.md", readme, heading, "sh")
}

// fencedBlocks returns the blocks fenced as ```lang in the section of the
// document (named name) that starts with heading.
func fencedBlocks(t *testing.T, name, doc, heading, lang string) []string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", name, heading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "\n```"+lang+"\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "\n```\n")
		if !ok {
			t.Fatalf("an unterminated %s block in %q", lang, heading)
		}
		blocks = append(blocks, block)
		section = after
	}
	if len(blocks) == 0 {
		t.Fatalf("%s's %q section has no %s block", name, heading, lang)
	}
	return blocks
}

// server is `seckill serve` running in development mode, as `make run`
// starts it, in a directory where ./bin/seckill is this test binary.
type server struct {
	addr string
	dir  string
	out  *testenv.LogBuffer
}

func startServer(t *testing.T) *server {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", runAsSeckill, self)
	if err := os.WriteFile(filepath.Join(dir, "bin", "seckill"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}

	redisURL := testenv.FlushedRedisURL(t, testenv.RedisDBReadme)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	s := &server{addr: addr, dir: dir, out: &testenv.LogBuffer{}}
	cmd := exec.Command(filepath.Join(dir, "bin", "seckill"), "serve")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"SECKILL_ENV=dev",
		"SECKILL_HTTP_ADDR=" + addr,
		"SECKILL_DATABASE_URL=" + storetest.NewDSN(t),
		"SECKILL_REDIS_URL=" + redisURL,
		"SECKILL_LOG_LEVEL=warn",
		"SECKILL_SHUTDOWN_TIMEOUT=5s",
	}
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("seckill serve did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("seckill serve printed:\n%s", s.out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK && strings.Contains(s.out.String(), "seckill is running") {
				return s
			}
		}
		select {
		case err := <-done:
			t.Fatalf("seckill serve exited: %v\n%s", err, s.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("seckill serve not ready after a minute:\n%s", s.out.String())
		}
	}
}

// shell runs script with bash (errexit, pipefail) in the server's directory
// from a plain environment: PATH, HOME and the server's address only.
func (s *server) shell(t *testing.T, script string) string {
	t.Helper()
	out, err := s.shellErr(script)
	if err != nil {
		t.Fatalf("%v running:\n%s\noutput:\n%s", err, script, out)
	}
	return out
}

// shellErr runs script as shell does and returns its output and how it
// exited.
func (s *server) shellErr(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "SECKILL_HTTP_ADDR=" + s.addr}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// banner returns what the server printed from its banner on.
func (s *server) banner(t *testing.T) string {
	t.Helper()
	_, b, ok := strings.Cut(s.out.String(), "seckill is running")
	if !ok {
		t.Fatalf("no banner in:\n%s", s.out.String())
	}
	return b
}

func (s *server) graphql(t *testing.T, token, query string, out any) {
	t.Helper()
	s.post(t, token, map[string]any{"query": query}, out)
}

func (s *server) post(t *testing.T, token string, request map[string]any, out any) {
	t.Helper()
	body, _ := json.Marshal(request)
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}
