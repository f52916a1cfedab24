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
// source Redis runs.
package lua

import (
	_ "embed"
	"strings"
)

//go:embed prelude.lua
var prelude string

// withPrelude returns src with the prelude after its header (its leading
// comment lines).
func withPrelude(src string) string {
	body := src
	for strings.HasPrefix(body, "--") {
		_, body, _ = strings.Cut(body, "\n")
	}
	return src[:len(src)-len(body)] + "\n" + prelude + "\n" + body
}

// Live reads a campaign's units left and admissions pending at one instant.
//
//go:embed live.lua
var Live string

// Admit decides one purchase atomically.
//
//go:embed admit.lua
var Admit string

//go:embed warm.lua
var warmSrc string

// Warm installs a campaign unless Redis holds it already.
var Warm = withPrelude(warmSrc)

// Release gives a failed admission's unit and buyer slot back, once.
//
//go:embed release.lua
var Release string

// Return gives a cancelled or expired order's unit and buyer slot back,
// once.
//
//go:embed return.lua
var Return string

// Ack forgets admissions that Postgres holds now.
//
//go:embed ack.lua
var Ack string

//go:embed update.lua
var updateSrc string

// Update changes the window and the pause of an existing campaign.
var Update = withPrelude(updateSrc)

//go:embed add_stock.lua
var addStockSrc string

// AddStock puts more units of an existing campaign on sale.
var AddStock = withPrelude(addStockSrc)

// RebuildBegin takes a campaign's rebuild lock and stops its admissions.
//
//go:embed rebuild_begin.lua
var RebuildBegin string

// RebuildAbort releases the rebuild lock of a rebuild that failed halfway.
//
//go:embed rebuild_abort.lua
var RebuildAbort string

//go:embed rebuild.lua
var rebuildSrc string

// Rebuild installs a campaign from Postgres in a new epoch and ends the
// rebuild.
var Rebuild = withPrelude(rebuildSrc)

// Stamp stops a campaign whose state another Redis server installed.
//
//go:embed stamp.lua
var Stamp string

// Retire trims a campaign that ended long ago to its hash and guard.
//
//go:embed retire.lua
var Retire string

// Login takes one sign-in attempt from several budgets at once (GCRA).
//
//go:embed login.lua
var Login string

// All maps each script's file name to its source.
var All = map[string]string{
	"admit.lua":     Admit,
	"warm.lua":      Warm,
	"release.lua":   Release,
	"return.lua":    Return,
	"ack.lua":       Ack,
	"update.lua":    Update,
	"add_stock.lua": AddStock,

	"rebuild_begin.lua": RebuildBegin,
	"rebuild_abort.lua": RebuildAbort,
	"rebuild.lua":       Rebuild,
	"stamp.lua":         Stamp,
	"retire.lua":        Retire,
	"login.lua":         Login,
	"live.lua":          Live,
}
