package relayproto_test

import (
	"encoding/json"
	"testing"

	"github.com/outboxlab/outboxlab/relayproto"
)

// TestQueryReplyAlwaysHasRows: a query that returned no row still says
// "rows": [], so a program that reads the field finds it; other replies
// carry no rows at all.
func TestQueryReplyAlwaysHasRows(t *testing.T) {
	tests := []struct {
		name  string
		reply relayproto.Reply
		want  string
	}{
		{"query without rows", relayproto.Reply{OK: true, Now: "t", Query: true, Columns: []string{"Id"}},
			`{"ok":true,"now":"t","tick":0,"columns":["Id"],"rows":[]}`},
		{"query with a row", relayproto.Reply{OK: true, Now: "t", Query: true, Columns: []string{"Id"}, Rows: [][]any{{1}}},
			`{"ok":true,"now":"t","tick":0,"columns":["Id"],"rows":[[1]]}`},
		{"not a query", relayproto.Reply{OK: true, Now: "t"}, `{"ok":true,"now":"t","tick":0}`},
		{"receive without a delivery", relayproto.Reply{OK: true, Now: "t", Receive: true}, `{"ok":true,"now":"t","tick":0,"delivery":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.reply)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got %s, want %s", b, tt.want)
			}
		})
	}
}
