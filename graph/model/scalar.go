package model

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
)

// The built-in scalars, coerced as the GraphQL spec says (section 3.5,
// "Input Coercion"). gqlgen's own unmarshalers are lenient: its Int takes
// "10", its String takes 10 and true, its ID takes 1.5. gqlparser's checks
// of variables let most of that through (it validates an Int variable's
// string by parsing it, and takes a number nested in an input object for a
// String), so the unmarshalers are where a wrong value is refused; gqlgen.yml
// binds the built-in scalars to these. A refusal is INVALID_INPUT naming
// the field or argument, as every other bad value is.
//
// What arrives here: a literal in the document as gqlparser decodes it
// (int64, float64, string, bool); a variable of the POST and GET
// transports as encoding/json decodes it with UseNumber (a json.Number,
// or an int64 or float64 for a top-level Int or Float variable, which
// gqlparser converts); a variable over WebSocket as a float64 for any
// number.

// MarshalInt32 writes an Int, as gqlgen's Int32 scalar does.
func MarshalInt32(v int32) graphql.Marshaler { return graphql.MarshalInt32(v) }

// UnmarshalInt32 takes an integral number within 32 bits. A string, even
// "10", is refused, and so is a number with a fraction or an exponent
// written in JSON ("10.0", "1e3"), as a literal 10.0 is in a document.
func UnmarshalInt32(v any) (int32, error) {
	var n int64
	switch v := v.(type) {
	case int:
		n = int64(v)
	case int32:
		return v, nil
	case int64:
		n = v
	case json.Number:
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			if isDecimalInteger(string(v)) {
				return 0, notA("a 32-bit integer", "") // beyond 64 bits
			}
			return 0, notA("an integer", "a number with a fraction or an exponent")
		}
		n = i
	case float64:
		// A WebSocket message's number: JSON says nothing of 10 against
		// 10.0 there, and graphql-js takes either.
		if v != math.Trunc(v) || math.IsInf(v, 0) {
			return 0, notA("an integer", "a number with a fraction")
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return 0, notA("a 32-bit integer", "")
		}
		return int32(v), nil
	default:
		return 0, notA("an integer", kind(v))
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, notA("a 32-bit integer", "")
	}
	return int32(n), nil
}

// MarshalFloat writes a Float, as gqlgen's Float scalar does.
func MarshalFloat(v float64) graphql.Marshaler { return graphql.MarshalFloat(v) }

// UnmarshalFloat takes any finite number, integers included; a string is
// refused.
func UnmarshalFloat(v any) (float64, error) {
	var f float64
	switch v := v.(type) {
	case int:
		f = float64(v)
	case int32:
		f = float64(v)
	case int64:
		f = float64(v)
	case float64:
		f = v
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(v), 64); err != nil {
			return 0, notA("a finite number", "")
		}
	default:
		return 0, notA("a number", kind(v))
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, notA("a finite number", "")
	}
	return f, nil
}

// MarshalString writes a String, as gqlgen's does.
func MarshalString(v string) graphql.Marshaler { return graphql.MarshalString(v) }

// UnmarshalString takes a string only: not a number, not a boolean.
func UnmarshalString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", notA("a string", kind(v))
}

// MarshalBoolean writes a Boolean, as gqlgen's does.
func MarshalBoolean(v bool) graphql.Marshaler { return graphql.MarshalBoolean(v) }

// UnmarshalBoolean takes true or false only: not "true", not 1.
func UnmarshalBoolean(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, notA("a boolean", kind(v))
}

// MarshalID writes an ID as a string, as gqlgen's does.
func MarshalID(v string) graphql.Marshaler { return graphql.MarshalID(v) }

// UnmarshalID takes a string, or an integer, which it writes in decimal
// (the spec's ID accepts both); a number with a fraction or an exponent, a
// boolean or anything else is refused. Whether the id names anything is
// graph/convert.go's to say.
func UnmarshalID(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int:
		return strconv.Itoa(v), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case json.Number:
		if isDecimalInteger(string(v)) {
			return string(v), nil
		}
		return "", notA("a string or an integer", "a number with a fraction or an exponent")
	case float64:
		if v == math.Trunc(v) && math.Abs(v) <= 1<<53 {
			return strconv.FormatInt(int64(v), 10), nil
		}
		return "", notA("a string or an integer", "a number with a fraction")
	}
	return "", notA("a string or an integer", kind(v))
}

// isDecimalInteger reports whether a JSON number is written as an integer:
// an optional minus and digits only.
func isDecimalInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// CoercionError refuses a value a scalar does not take. The error
// presenter (graph/server.go) answers it as INVALID_INPUT naming the field
// or argument, which the error's path gives: "stock must be an integer,
// not a string".
type CoercionError struct {
	Want string // what the scalar takes: "an integer"
	Got  string // what came instead: "a string"; "" when the type was right and the value not
}

func (e *CoercionError) Error() string {
	if e.Got == "" {
		return "must be " + e.Want
	}
	return "must be " + e.Want + ", not " + e.Got
}

func notA(want, got string) error { return &CoercionError{Want: want, Got: got} }

// kind names the JSON type of a value, as a refusal says it.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int32, int64, float64, json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "a value of another type"
}
