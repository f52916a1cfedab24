package salepage

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"seckill/internal/seckill"
)

// TestEveryAnswerHasAMessage holds src/i18n.js to the API: every value of
// SeckillOutcome, OrderStatus and WaitingRoomState in the schema, every
// state of the domain's waiting room and every error code has a message
// for the buyer in English and in Chinese.
func TestEveryAnswerHasAMessage(t *testing.T) {
	src, err := os.ReadFile("src/i18n.js")
	if err != nil {
		t.Fatal(err)
	}
	en, zh, ok := strings.Cut(string(src), "\nconst zh = {")
	if !ok {
		t.Fatal("src/i18n.js has no `const zh = {`")
	}
	zh, _, _ = strings.Cut(zh, "\n};")

	files, err := filepath.Glob("../graph/*.graphqls")
	if err != nil || len(files) == 0 {
		t.Fatalf("the schema: %v", err)
	}
	var schema strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		schema.Write(b)
	}
	var want []string
	for _, enum := range []string{"SeckillOutcome", "OrderStatus", "WaitingRoomState"} {
		blocks := regexp.MustCompile(`enum `+enum+` \{([^}]*)\}`).FindAllStringSubmatch(schema.String(), -1)
		if len(blocks) == 0 {
			t.Fatalf("no enum %s in the schema", enum)
		}
		for _, b := range blocks {
			want = append(want, regexp.MustCompile(`(?m)^\s+([A-Z][A-Z_]+)\s*$`).FindAllString(b[1], -1)...)
		}
	}
	want = append(want, seckill.EUNAUTHENTICATED, seckill.EFORBIDDEN, seckill.ENOTFOUND, seckill.EINVALID,
		seckill.ECONFLICT, seckill.EUNAVAILABLE, seckill.EINTERNAL)
	// The domain's room states too, should the schema ever lag behind them.
	for _, s := range seckill.RoomStates {
		want = append(want, string(s))
	}
	if len(want) < 20 {
		t.Fatalf("found only %v in the schema", want)
	}
	for _, k := range want {
		k = strings.TrimSpace(k)
		for lang, table := range map[string]string{"English": en, "Chinese": zh} {
			if !strings.Contains(table, "\n  "+k+":") {
				t.Errorf("%s has no %s message in src/i18n.js", k, lang)
			}
		}
	}
}
