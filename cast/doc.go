// Package cast holds the actors the lessons stage (checkout, the Day 15
// worker, relays, the broker driver, consumers) and what coordinates them:
// the barrier and the concurrent runner. Lessons and the explorer import it.
package cast
