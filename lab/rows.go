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
