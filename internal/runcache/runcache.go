// Package runcache keeps one result per key for the life of a test
// binary, so the tests that read a lesson's run share one run of it
// instead of each making its own.
//
// A lesson's run is deterministic in everything its tests read (every
// check is on the database or the ledgers, never on wall-clock time), so
// a second run of the same key would only repeat the first. Callers must
// treat what Get returns as read-only: other tests hold the same value.
package runcache

import "sync"

// Cache maps a key to the value its first Get made. The zero Cache is
// ready to use; it must not be copied after first use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*entry[V]
}

type entry[V any] struct {
	once  sync.Once
	value V
	err   error
}

// Get returns the value made for key, calling make the first time key is
// asked for. Concurrent callers of one key wait for that one call; callers
// of other keys do not wait for it. An error is kept like a value: every
// caller of the key sees the first call's error, and make is not retried.
func (c *Cache[K, V]) Get(key K, make func() (V, error)) (V, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[K]*entry[V]{}
	}
	e, ok := c.entries[key]
	if !ok {
		e = &entry[V]{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.value, e.err = make() })
	return e.value, e.err
}

// Len is how many keys have been asked for.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
