package model

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"seckill/internal/seckill"
)

// MarshalTime writes t as an RFC 3339 string in UTC.
func MarshalTime(t time.Time) graphql.ContextMarshaler {
	return graphql.ContextWriterFunc(func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, strconv.Quote(t.UTC().Format(time.RFC3339Nano)))
		return err
	})
}

// UnmarshalTime reads an RFC 3339 string with a zone offset. Anything else is
// the client's mistake, so it is an INVALID_INPUT error naming the input
// field the value was given for (gqlgen's own Time scalar also accepts
// strings without a zone and the empty string, which we do not want).
func UnmarshalTime(ctx context.Context, v any) (time.Time, error) {
	if s, ok := v.(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, nil
		}
	}
	field := pathField(graphql.GetPath(ctx))
	return time.Time{}, seckill.Invalidf(field, "%s must be an RFC 3339 time such as \"2026-11-29T12:00:00Z\"", field)
}

// pathField returns the last field name of an input path: the field whose
// value is wrong.
func pathField(p ast.Path) string {
	for i := len(p) - 1; i >= 0; i-- {
		if name, ok := p[i].(ast.PathName); ok {
			return string(name)
		}
	}
	return ""
}
