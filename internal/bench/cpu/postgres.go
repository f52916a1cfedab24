package cpu

import (
	"slices"
	"strings"
)

// PostgresDatabase returns the Counts of a postmaster's group that keeps
// the backends (and autovacuum workers) of databases and the processes
// every database shares (checkpointer, background writer, WAL writer,
// launchers), and refuses other databases' backends: on a shared server
// those are other people's work.
func PostgresDatabase(databases ...string) func(cmdline string) bool {
	return func(cmdline string) bool {
		db, ok := PostgresTitle(cmdline)
		return !ok || slices.Contains(databases, db)
	}
}

// PostgresTitle reads the database from a Postgres process's title, as
// update_process_title sets it: "postgres: [cluster: ]user database
// host(port) activity" for a backend and "postgres: [cluster: ]autovacuum
// worker database" for a vacuum. ok is false for a process of no one
// database (checkpointer, walwriter, ...) or a title it does not know.
func PostgresTitle(cmdline string) (database string, ok bool) {
	rest, found := strings.CutPrefix(cmdline, "postgres: ")
	if !found {
		return "", false
	}
	f := strings.Fields(rest)
	// Debian names its clusters ("15/main: ").
	if len(f) > 0 && strings.HasSuffix(f[0], ":") {
		f = f[1:]
	}
	switch {
	case len(f) >= 3 && f[0] == "autovacuum" && f[1] == "worker":
		return f[2], true
	case len(f) >= 3 && isClientHost(f[2]):
		return f[1], true
	}
	return "", false
}

// isClientHost reports whether s is a backend title's client: "[local]" or
// "host(port)".
func isClientHost(s string) bool {
	if s == "[local]" {
		return true
	}
	i := strings.LastIndexByte(s, '(')
	return i > 0 && strings.HasSuffix(s, ")") && i < len(s)-2
}
