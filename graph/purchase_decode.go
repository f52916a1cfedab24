package graph

import (
	"encoding/json"
)

// decodePurchaseRequest decodes a request body into req. The bodies buyers
// send ({"query":"...","variables":{"voucherId":"42"}}, perhaps with an
// operationName) are read by a small scanner; encoding/json's reflection
// was the largest cost left in the fast path. Anything the scanner does not
// expect (escapes, non-ASCII bytes, numbers, nested values, other or
// repeated keys) is decoded by json.Unmarshal instead, so the result is
// always json.Unmarshal's: FuzzDecodePurchaseRequest holds the two to that.
func decodePurchaseRequest(body []byte, req *purchaseRequest) error {
	if scanPurchaseRequest(body, req) {
		return nil
	}
	*req = purchaseRequest{}
	return json.Unmarshal(body, req)
}

// scanPurchaseRequest fills req from the plain shape of a request body and
// reports whether body had that shape.
func scanPurchaseRequest(body []byte, req *purchaseRequest) bool {
	s := scanner{b: body}
	if !s.byte('{') {
		return false
	}
	var seen [4]bool
	for first := true; ; first = false {
		if s.byte('}') {
			s.space()
			return s.i == len(s.b)
		}
		if !first && !s.byte(',') {
			return false
		}
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return false
		}
		switch key {
		case "query":
			if seen[0] {
				return false
			}
			seen[0] = true
			if req.Query, ok = s.str(); !ok {
				return false
			}
		case "operationName":
			if seen[1] {
				return false
			}
			seen[1] = true
			if !s.null() {
				if req.OperationName, ok = s.str(); !ok {
					return false
				}
			}
		case "variables":
			if seen[2] {
				return false
			}
			seen[2] = true
			if !s.null() && !s.variables(req) {
				return false
			}
		case "extensions":
			if seen[3] || !s.null() {
				return false
			}
			seen[3] = true
			req.Extensions = json.RawMessage("null")
		default:
			return false
		}
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte skips space and then c, if c is next.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) null() bool {
	s.space()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// rawStr returns the next string with its quotes, if it is printable ASCII
// without escapes.
func (s *scanner) rawStr() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i - 1
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start:s.i], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

func (s *scanner) str() (string, bool) {
	raw, ok := s.rawStr()
	if !ok {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// variables reads an object whose values are all strings.
func (s *scanner) variables(req *purchaseRequest) bool {
	if !s.byte('{') {
		return false
	}
	req.Variables = make(map[string]json.RawMessage, 1)
	for first := true; ; first = false {
		if s.byte('}') {
			return true
		}
		if !first && !s.byte(',') {
			return false
		}
		name, ok := s.str()
		if !ok || !s.byte(':') {
			return false
		}
		if _, dup := req.Variables[name]; dup {
			return false
		}
		raw, ok := s.rawStr()
		if !ok {
			return false
		}
		req.Variables[name] = json.RawMessage(raw)
	}
}
