package lab

import "fmt"

// Rows words an affected-row count the way reports print it: "0 rows",
// "1 row", "2 rows".
func Rows(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

// Count is n with its noun: "1 send", "0 sends", "2 sends" (one for n == 1,
// else many).
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
