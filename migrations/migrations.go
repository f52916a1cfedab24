// Package migrations holds the SQL migrations of the seckill schema, embedded
// in the binary, and Migrate, which applies them under a lock.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"

	"github.com/uptrace/bun/migrate"
)

//go:embed *.sql
var sqlFS embed.FS

// Migrations are the schema migrations, discovered from the embedded files.
// Files are named 20261129120000_name.tx.up.sql / .tx.down.sql; ".tx" runs a
// file in one transaction and --bun:split separates its statements.
var Migrations = migrate.NewMigrations()

func init() {
	if err := Migrations.Discover(sqlFS); err != nil {
		panic(err)
	}
}

// Checksum is a hex digest of every migration file's name and content. Test
// helpers name their migrated template database after it, so a changed
// migration gets a fresh template.
func Checksum() string {
	names, err := fs.Glob(sqlFS, "*.sql")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		b, err := sqlFS.ReadFile(name)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
