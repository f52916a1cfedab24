package seckill

import (
	"errors"
	"fmt"
	"strings"
)

// Error codes. Every domain error carries one; the edges map them to the
// wire (GraphQL extensions.code, HTTP status) in exactly one place each.
const (
	EUNAUTHENTICATED = "UNAUTHENTICATED"
	EFORBIDDEN       = "FORBIDDEN"
	ENOTFOUND        = "NOT_FOUND"
	EINVALID         = "INVALID_INPUT"
	ECONFLICT        = "CONFLICT"
	EUNAVAILABLE     = "UNAVAILABLE"
	EINTERNAL        = "INTERNAL"
)

// Error is a domain error: a code and a message that is safe to show a
// client. Field names the offending input field for EINVALID errors.
type Error struct {
	Code    string
	Message string
	Field   string
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("seckill error: code=%s field=%s message=%s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("seckill error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns a domain error with the given code and a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalidf returns an EINVALID error about one input field.
func Invalidf(field string, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the domain error in err's chain, EINTERNAL for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return "" // before e: errors.As moves it to the heap, on every call
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the safe message of a domain error, or "internal
// error" for anything else: details of internal errors never reach clients.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// ErrorField returns the input field named by an EINVALID error, or "".
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// FieldErrors are the EINVALID errors of several fields of one input, at
// most one a field, in the order the input lists its fields: what a form
// shows next to each field. As an error it is the first of them
// (ErrorCode EINVALID, ErrorField and ErrorMessage the first's), so an edge
// that shows one error shows that one.
type FieldErrors []*Error

// Error implements the error interface.
func (fe FieldErrors) Error() string {
	msgs := make([]string, len(fe))
	for i, e := range fe {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.As find each field's error, the first first.
func (fe FieldErrors) Unwrap() []error {
	out := make([]error, len(fe))
	for i, e := range fe {
		out[i] = e
	}
	return out
}

// add records err, an EINVALID error, unless its field has one already.
func (fe *FieldErrors) add(err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	for _, have := range *fe {
		if have.Field == e.Field {
			return
		}
	}
	*fe = append(*fe, e)
}

// err returns fe as an error, nil when it holds none.
func (fe FieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return fe
}

// AllFieldErrors returns every field error in err: the FieldErrors it
// carries, or the one EINVALID error it is; none for another error.
func AllFieldErrors(err error) []*Error {
	var fe FieldErrors
	if errors.As(err, &fe) {
		return fe
	}
	var e *Error
	if errors.As(err, &e) && e.Code == EINVALID {
		return []*Error{e}
	}
	return nil
}
