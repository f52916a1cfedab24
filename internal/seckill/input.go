package seckill

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// ParseID reads an id written by a client: a positive int64 in canonical
// decimal ("42"; not "+42", "042" or " 42"), so that one id has one
// spelling. Anything else is an EINVALID error naming field.
func ParseID(field, s string) (int64, error) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, invalidID(field)
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, invalidID(field)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalidID(field)
	}
	return n, nil
}

func invalidID(field string) error {
	return Invalidf(field, "%s must be a positive integer id", field)
}

// checkText refuses text that would not be stored or shown as written:
// bytes that are not UTF-8, and control characters (Postgres drops or
// refuses NUL; the others hide in a page). multiline allows line breaks
// and tabs. EINVALID naming field.
func checkText(field, s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return Invalidf(field, "%s must be UTF-8 text", field)
	}
	for _, r := range s {
		if !unicode.IsControl(r) || multiline && (r == '\n' || r == '\r' || r == '\t') {
			continue
		}
		return Invalidf(field, "%s must not contain control characters (found U+%04X)", field, r)
	}
	return nil
}
