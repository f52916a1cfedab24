package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestScalarsAreStrict runs each built-in scalar's unmarshaler on every
// shape a value reaches it in (graph/model's scalar.go lists them):
// literals (int64, float64, string, bool), HTTP variables (json.Number),
// WebSocket variables (float64), lists and objects.
func TestScalarsAreStrict(t *testing.T) {
	type unmarshal func(any) (any, error)
	wrap := func(f any) unmarshal {
		switch f := f.(type) {
		case func(any) (int32, error):
			return func(v any) (any, error) { return f(v) }
		case func(any) (float64, error):
			return func(v any) (any, error) { return f(v) }
		case func(any) (string, error):
			return func(v any) (any, error) { return f(v) }
		case func(any) (bool, error):
			return func(v any) (any, error) { return f(v) }
		}
		panic(fmt.Sprintf("%T", f))
	}
	const refused = "refused"
	tests := []struct {
		scalar string
		f      unmarshal
		in     any
		want   any // refused, or the value
	}{
		{"Int", wrap(UnmarshalInt32), int64(10), int32(10)},
		{"Int", wrap(UnmarshalInt32), json.Number("-10"), int32(-10)},
		{"Int", wrap(UnmarshalInt32), float64(10), int32(10)},
		{"Int", wrap(UnmarshalInt32), int64(math.MaxInt32), int32(math.MaxInt32)},
		{"Int", wrap(UnmarshalInt32), int64(math.MinInt32), int32(math.MinInt32)},
		{"Int", wrap(UnmarshalInt32), int64(math.MaxInt32 + 1), refused},
		{"Int", wrap(UnmarshalInt32), json.Number("2147483648"), refused},
		{"Int", wrap(UnmarshalInt32), json.Number("99999999999999999999"), refused},
		{"Int", wrap(UnmarshalInt32), float64(1 << 31), refused},
		{"Int", wrap(UnmarshalInt32), json.Number("10.0"), refused},
		{"Int", wrap(UnmarshalInt32), json.Number("1e1"), refused},
		{"Int", wrap(UnmarshalInt32), float64(10.5), refused},
		{"Int", wrap(UnmarshalInt32), math.Inf(1), refused},
		{"Int", wrap(UnmarshalInt32), "10", refused},
		{"Int", wrap(UnmarshalInt32), true, refused},
		{"Int", wrap(UnmarshalInt32), nil, refused},
		{"Int", wrap(UnmarshalInt32), []any{int64(1)}, refused},
		{"Int", wrap(UnmarshalInt32), map[string]any{}, refused},

		{"Float", wrap(UnmarshalFloat), float64(1.5), 1.5},
		{"Float", wrap(UnmarshalFloat), int64(2), float64(2)},
		{"Float", wrap(UnmarshalFloat), json.Number("2"), float64(2)},
		{"Float", wrap(UnmarshalFloat), json.Number("-2.5e3"), float64(-2500)},
		{"Float", wrap(UnmarshalFloat), json.Number("1e400"), refused},
		{"Float", wrap(UnmarshalFloat), math.NaN(), refused},
		{"Float", wrap(UnmarshalFloat), "1.5", refused},
		{"Float", wrap(UnmarshalFloat), false, refused},
		{"Float", wrap(UnmarshalFloat), nil, refused},

		{"String", wrap(UnmarshalString), "x", "x"},
		{"String", wrap(UnmarshalString), "", ""},
		{"String", wrap(UnmarshalString), json.Number("5"), refused},
		{"String", wrap(UnmarshalString), int64(5), refused},
		{"String", wrap(UnmarshalString), float64(5), refused},
		{"String", wrap(UnmarshalString), true, refused},
		{"String", wrap(UnmarshalString), nil, refused},
		{"String", wrap(UnmarshalString), []any{"x"}, refused},

		{"Boolean", wrap(UnmarshalBoolean), true, true},
		{"Boolean", wrap(UnmarshalBoolean), false, false},
		{"Boolean", wrap(UnmarshalBoolean), "true", refused},
		{"Boolean", wrap(UnmarshalBoolean), json.Number("1"), refused},
		{"Boolean", wrap(UnmarshalBoolean), int64(1), refused},
		{"Boolean", wrap(UnmarshalBoolean), nil, refused},

		{"ID", wrap(UnmarshalID), "abc", "abc"},
		{"ID", wrap(UnmarshalID), int64(42), "42"},
		{"ID", wrap(UnmarshalID), json.Number("42"), "42"},
		{"ID", wrap(UnmarshalID), json.Number("-42"), "-42"},
		{"ID", wrap(UnmarshalID), float64(42), "42"},
		{"ID", wrap(UnmarshalID), json.Number("4.2"), refused},
		{"ID", wrap(UnmarshalID), json.Number("4e2"), refused},
		{"ID", wrap(UnmarshalID), float64(4.2), refused},
		{"ID", wrap(UnmarshalID), true, refused},
		{"ID", wrap(UnmarshalID), nil, refused},
		{"ID", wrap(UnmarshalID), map[string]any{}, refused},
	}
	for _, tc := range tests {
		got, err := tc.f(tc.in)
		if tc.want == refused {
			var cerr *CoercionError
			if !errors.As(err, &cerr) {
				t.Errorf("%s(%T %v) = %v, %v; want a CoercionError", tc.scalar, tc.in, tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s(%T %v) = %T %v, %v; want %T %v", tc.scalar, tc.in, tc.in, got, got, err, tc.want, tc.want)
		}
	}
}
