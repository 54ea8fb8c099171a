package store

import (
	"os"
	"strings"
)

// fileURI is path as an SQLite file: URI. SQLite decodes %HH in a URI's
// path and ends the path at '?' or '#', so those three characters (and
// control characters) are escaped; a path that starts with "//" would be
// read as an authority, so an absolute path gets an empty one first.
func fileURI(path string) string {
	var b strings.Builder
	b.WriteString("file:")
	if strings.HasPrefix(path, "/") {
		b.WriteString("//")
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '%' || c == '?' || c == '#' || c < 0x20 || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// readOnlyParams are the URI parameters of a read-only open. Without a
// write-ahead log beside the file, the database is opened immutable: SQLite
// takes no locks and makes no -wal or -shm file, so a kept database on a
// read-only disk can be read and nothing is left beside it. With a log, its
// pages must be read too, so the file is opened mode=ro.
func readOnlyParams(path string) []string {
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return []string{"mode=ro"}
	}
	return []string{"mode=ro", "immutable=1"}
}
