package bench

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/seckill"
)

// TestSolver: the solver answers the challenge the server sets, and says
// why when the server's answer carries none it can use.
func TestSolver(t *testing.T) {
	answers := map[string]string{
		"/none":      `{"data":{"seckillChallenge":{"kind":"NONE"}}}`,
		"/pow":       `{"data":{"seckillChallenge":{"kind":"PROOF_OF_WORK","token":"tok","bits":4}}}`,
		"/quiz":      `{"data":{"seckillChallenge":{"kind":"QUIZ","token":"q"}}}`,
		"/errors":    `{"errors":[{"message":"voucher 9 not found","extensions":{"code":"NOT_FOUND"}}],"data":null}`,
		"/null":      `{"data":null}`,
		"/no-token":  `{"data":{"seckillChallenge":{"kind":"PROOF_OF_WORK"}}}`,
		"/quiz-bare": `{"data":{"seckillChallenge":{"kind":"QUIZ"}}}`,
		"/html":      `<html>proxy error</html>`,
		"/captcha":   `{"data":{"seckillChallenge":{"kind":"CAPTCHA"}}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(answers[r.URL.Path]))
	}))
	defer srv.Close()
	r := &runner{auth: []string{"Bearer t"}}
	solve := func(path string) (map[string]any, error) {
		body, err := r.solver(srv.URL+path, 9)(t.Context(), 0)
		if err != nil {
			return nil, err
		}
		var req struct{ Variables map[string]any }
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("%s: body %s: %v", path, body, err)
		}
		return req.Variables, nil
	}

	if v, err := solve("/none"); err != nil || v["voucherId"] != "9" || v["answer"] != nil {
		t.Errorf("none: %v, %v", v, err)
	}
	v, err := solve("/pow")
	if err != nil {
		t.Fatalf("pow: %v", err)
	}
	if a, _ := v["answer"].(map[string]any); a["token"] != "tok" || a["solution"] != seckill.SolvePoW("tok", 4) {
		t.Errorf("pow answer: %v", v["answer"])
	}
	if v, err := solve("/quiz"); err != nil || v["answer"].(map[string]any)["token"] != "q" {
		t.Errorf("quiz: %v, %v", v, err)
	}
	for path, want := range map[string]string{
		"/errors":    "voucher 9 not found",
		"/null":      "without data",
		"/no-token":  "without a token",
		"/quiz-bare": "without a token",
		"/html":      "200 OK",
		"/captcha":   "unknown kind",
	} {
		if _, err := solve(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want one saying %q", path, err, want)
		}
	}
}
