package app

import "golang.org/x/crypto/bcrypt"

// Operators' passwords hash at the cheapest cost in tests (this package's
// and app_test's): the dashboard's tests sign in many times.
func init() { bcryptCost = bcrypt.MinCost }
