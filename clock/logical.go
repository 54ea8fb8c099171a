package clock

import "strconv"

// Logical prints an instant of logical integer time the way the lessons on
// outbox_events write it: "t=130".
func Logical(t int64) string { return "t=" + strconv.FormatInt(t, 10) }
