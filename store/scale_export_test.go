package store

// WithBusyHook returns r calling f after each SQLITE_BUSY, before its
// pause: a test's handshake with a claimer that is waiting for the lock.
func WithBusyHook(r Retry, f func()) Retry {
	r.onBusy = f
	return r
}
