// Package lua holds the Redis scripts of the admission adapter
// (internal/admission), embedded. Each file starts with a header that lists
// its KEYS, ARGV and return values; every script validates all of its
// arguments before its first write, and touches only keys passed in KEYS that
// share one hash tag (one campaign, or one client address for sign-in), so one
// Redis Cluster slot.
//
// Scripts cannot import each other: the helpers the campaign scripts share
// are written once, in prelude.lua, and put between such a script's header
// and its body here, so Warm, Update, AddStock and Rebuild hold the whole
// source Redis runs. A script asks for them with a header line starting
// "-- Uses: prelude.lua".
package lua

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// files holds every script: All is built from it, so a .lua file added
// here is in All (and checked by this package's tests) without being listed.
//
//go:embed *.lua
var files embed.FS

// preludeFile is the one .lua file that is not a script of its own.
const preludeFile = "prelude.lua"

// usesPrelude matches the header line of a script that wants the prelude.
var usesPrelude = regexp.MustCompile(`(?m)^-- Uses: prelude\.lua\b`)

// All maps each script's file name (every .lua file of the package but the
// prelude) to the source Redis runs, the prelude put in where a script asks
// for it.
var All = scripts()

func scripts() map[string]string {
	prelude := read(preludeFile)
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		panic(err)
	}
	all := make(map[string]string, len(names))
	for _, name := range names {
		if name == preludeFile {
			continue
		}
		src := read(name)
		if usesPrelude.MatchString(header(src)) {
			src = withPrelude(src, prelude)
		}
		all[name] = src
	}
	return all
}

func read(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("lua: %v", err))
	}
	return string(b)
}

// header returns src's header: its leading comment lines.
func header(src string) string {
	body := src
	for strings.HasPrefix(body, "--") {
		_, body, _ = strings.Cut(body, "\n")
	}
	return src[:len(src)-len(body)]
}

// withPrelude returns src with the prelude after its header.
func withPrelude(src, prelude string) string {
	h := header(src)
	return h + "\n" + prelude + "\n" + src[len(h):]
}

// script returns the source of the script in file name, for the variables
// below; a name that is not a script stops the program at its start.
func script(name string) string {
	src, ok := All[name]
	if !ok {
		panic("lua: no script " + name)
	}
	return src
}

var (
	// Live reads a campaign's units left and admissions pending at one
	// instant.
	Live = script("live.lua")
	// Admit decides one purchase atomically.
	Admit = script("admit.lua")
	// RoomJoin numbers a buyer who joins a waiting room, once.
	RoomJoin = script("room_join.lua")
	// RoomCounts reads a waiting room's counts of joiners.
	RoomCounts = script("room_counts.lua")
	// Warm installs a campaign unless Redis holds it already.
	Warm = script("warm.lua")
	// Release gives a failed admission's unit and buyer slot back, once.
	Release = script("release.lua")
	// ReturnUnits gives cancelled or expired orders' units of one campaign
	// back in one step, once per order.
	ReturnUnits = script("return_units.lua")
	// Ack forgets admissions that Postgres holds now.
	Ack = script("ack.lua")
	// Update changes the window and the pause of an existing campaign.
	Update = script("update.lua")
	// AddStock puts more units of an existing campaign on sale.
	AddStock = script("add_stock.lua")
	// RebuildBegin takes a campaign's rebuild lock and stops its
	// admissions.
	RebuildBegin = script("rebuild_begin.lua")
	// RebuildAbort releases the rebuild lock of a rebuild that failed
	// halfway.
	RebuildAbort = script("rebuild_abort.lua")
	// Rebuild installs a campaign from Postgres in a new epoch and ends the
	// rebuild.
	Rebuild = script("rebuild.lua")
	// Stamp stops a campaign whose state another Redis server installed.
	Stamp = script("stamp.lua")
	// Retire trims a campaign that ended long ago to its hash and guard.
	Retire = script("retire.lua")
	// MoveOut takes units from one stock shard and records their move.
	MoveOut = script("move_out.lua")
	// MoveIn adds a move's units to the recipient shard, once.
	MoveIn = script("move_in.lua")
	// ShardStop stops one stock shard for a rebuild of its campaign.
	ShardStop = script("shard_stop.lua")
	// ShardInstall installs one stock shard as a rebuild read it.
	ShardInstall = script("shard_install.lua")
	// Login takes one sign-in attempt from several budgets at once (GCRA),
	// refused while the pair's failure mark exists, or hands one back.
	Login = script("login.lua")
)
