package graph

import (
	"encoding/json"
	"reflect"
	"testing"
)

var decodeSeeds = []string{
	`{"query":"mutation Buy($voucherId: ID!) { seckill(voucherId: $voucherId) { outcome orderId } }","variables":{"voucherId":"42"}}`,
	`{"query":"q","operationName":"Buy","variables":{"voucherId":"42"},"extensions":null}`,
	` { "query" : "q" , "variables" : { "a" : "1" , "b" : "2" } } ` + "\n",
	`{"query":"q","operationName":null,"variables":null}`,
	`{"query":"q","variables":{}}`,
	`{"query":"q"}`,
	`{}`,
	`{"query":"q","variables":{"v":1}}`,
	`{"query":"q","variables":{"v":"1","v":"2"}}`,
	`{"query":"q","query":"r"}`,
	`{"Query":"q"}`,
	`{"query":"a\"b"}`,
	`{"query":"é"}`,
	`{"query":null}`,
	`{"query":"q","extensions":{}}`,
	`{"query":"q",}`,
	`{"query":"q"} x`,
	`{"query":"q","variables":{"v":"1"}`,
	`[]`,
	`null`,
	``,
	`{"query":"q","id":"x"}`,
	`{"query":"\u0071"}`,
	`{"query":"q","variables":{"v":null}}`,
	"{\"query\":\"a\tb\"}",
}

// TestDecodePurchaseRequest runs the seeds through FuzzDecodePurchaseRequest's
// check and makes sure the scanner takes the shapes buyers send.
func TestDecodePurchaseRequest(t *testing.T) {
	for _, s := range decodeSeeds {
		checkDecode(t, []byte(s))
	}
	for _, s := range decodeSeeds[:6] {
		var req purchaseRequest
		if !scanPurchaseRequest([]byte(s), &req) {
			t.Errorf("the scanner refused %s", s)
		}
	}
}

// FuzzDecodePurchaseRequest: whenever the scanner accepts a body,
// json.Unmarshal accepts it too and decodes the same request; and
// decodePurchaseRequest always agrees with json.Unmarshal.
func FuzzDecodePurchaseRequest(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecode)
}

func checkDecode(t *testing.T, body []byte) {
	var scanned, decoded, want purchaseRequest
	ok := scanPurchaseRequest(body, &scanned)
	wantErr := json.Unmarshal(body, &want)
	if ok && (wantErr != nil || !reflect.DeepEqual(scanned, want)) {
		t.Fatalf("%q: scanner gave %+v, json.Unmarshal %+v (%v)", body, scanned, want, wantErr)
	}
	err := decodePurchaseRequest(body, &decoded)
	if (err == nil) != (wantErr == nil) || err == nil && !reflect.DeepEqual(decoded, want) {
		t.Fatalf("%q: decodePurchaseRequest gave %+v (%v), json.Unmarshal %+v (%v)", body, decoded, err, want, wantErr)
	}
}

// TestPlainJSONString: what plainJSONString returns for a token is what
// json.Unmarshal returns for it; what it declines goes to json.Unmarshal.
func TestPlainJSONString(t *testing.T) {
	for _, raw := range []string{`"42"`, `""`, `"a b~"`, `"\u0034"`, `"\\"`, `"é"`, "\"\t\"", `"x`, `42`, `"a"b"`} {
		got, ok := plainJSONString([]byte(raw))
		var want string
		err := json.Unmarshal([]byte(raw), &want)
		if ok && (err != nil || got != want) {
			t.Errorf("%s: plain %q, json.Unmarshal %q, %v", raw, got, want, err)
		}
	}
	if _, ok := plainJSONString([]byte(`"42"`)); !ok {
		t.Error(`"42" is plain`)
	}
}
