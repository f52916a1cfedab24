// Package static holds the dashboard's stylesheet and script, written for it
// and embedded: the dashboard loads nothing from anywhere else.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

// FS holds app.css and app.js.
//
//go:embed app.css app.js
var FS embed.FS

// Version is a digest of every file, put in asset URLs so browsers that
// cache them for long fetch them again after a change.
var Version = func() string {
	h := sha256.New()
	_ = fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := FS.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// URL returns the path under which the dashboard serves a file of FS.
func URL(name string) string { return "/admin/static/" + name + "?v=" + Version }
