package seckill

// FirstExternalUserID is the first user id given to a subject of an
// identity provider (a string "sub" claim), which gets its id from a table
// at first sight. Ids below it are the integer subjects of the tokens we
// sign ourselves (HS256), which are refused from it up: the two ranges
// never meet, whatever either side has handed out. 2^62 still has 19
// decimal digits, as every int64 id has at most.
const FirstExternalUserID int64 = 1 << 62

// IsExternalUserID reports whether id is in the range of identity
// provider subjects.
func IsExternalUserID(id int64) bool { return id >= FirstExternalUserID }

// Subject is an identity provider's user: a string unique within its
// issuer.
type Subject struct{ Issuer, Subject string }
