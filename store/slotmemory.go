package store

import (
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// SlotHeapLimit is the most memory SQLite may hold, all its connections
// together, in a process that has run a claim file: a claim file's
// statement that needs more (a sort of a hundred 8 MB values) fails with
// SQLITE_NOMEM, its own fault ([SlotStatementError]), instead of growing
// the process by a gigabyte. SQLITE_LIMIT_LENGTH bounds one value; this
// bounds them all. The lab's own statements hold a few MiB at most.
const SlotHeapLimit = 256 << 20

// memoryAccounted reports whether SQLite counts the memory it holds, which
// its heap limit needs. This build of SQLite counts nothing by default
// (SQLITE_DEFAULT_MEMSTATUS=0) and takes the setting only before it
// initializes, so it is set while the package initializes, before any
// connection opens.
var memoryAccounted = countSQLiteMemory()

func countSQLiteMemory() bool {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.Xmalloc(tls, 8)
	if va == 0 {
		return false
	}
	defer libc.Xfree(tls, va)
	return sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, libc.VaList(va, int32(1))) == sqlite3.SQLITE_OK
}

var heapLimited sync.Once

// limitHeap sets SQLite's hard heap limit to [SlotHeapLimit], once, when
// the process first opens a connection that may run a slot file.
func limitHeap() {
	heapLimited.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		sqlite3.Xsqlite3_hard_heap_limit64(tls, SlotHeapLimit)
	})
}

// sqliteHeapLimit is SQLite's hard heap limit now, 0 for none (tests).
func sqliteHeapLimit() int64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlite3.Xsqlite3_hard_heap_limit64(tls, -1)
}
