package reports

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestBenchTextFitsAPage: a bench report, its prose and its tables, holds
// no line wider than MaxLine, on either engine, and loses no word: the long
// settings lines wrap, and the table that cannot fit goes on in a second
// table instead of cutting its cells (fetch-ahead, 0.03/0.09).
func TestBenchTextFitsAPage(t *testing.T) {
	long := func(s string) string { return strings.Repeat(s+" ", 12) }
	server := &lab.BenchServer{CheckpointForced: true, CheckpointMs: 12, Checkpoints: 1, BuffersCheckpoint: 1234,
		BuffersBackend: 56, WALMB: 7.5, Autovacuums: 2, CatalogDeadTuples: 42}
	rows := []lab.BenchRow{
		{Messages: 100, Workers: 2, Claim: "indexed", Batch: 1, MsgsPerS: 10801, CeilingRatio: 0.5, P50Ms: 0.029, P99Ms: 0.09,
			CompleteP50Ms: 0.03, CompleteP99Ms: 0.09, BusyRetries: 15, LongestWaitMs: 5.7, WorkerShares: []float64{0.13, 0.87}, PeakRSSMB: 24},
		{Messages: 100, Workers: 2, Claim: "fetch-ahead", MeanFetch: 1.9, MeanCompletion: 50, MsgsPerS: 21693, CeilingRatio: 1,
			P50Ms: 0.052, P99Ms: 0.45, CompleteP50Ms: 1.2, CompleteP99Ms: 2.37, LongestWaitMs: 0.5, WorkerShares: []float64{0.5, 0.5}, PeakRSSMB: 23},
		{Messages: 100, Workers: 2, Claim: "river", Peer: true, MsgsPerS: 323, CeilingRatio: 0.01, PeakRSSMB: 27},
	}
	tests := []struct {
		engine string
		server *lab.BenchServer
		tables int // the rows' table, split in two, and on PostgreSQL the server's, split in two
	}{
		{"sqlite", nil, 2},
		{"postgres", server, 4},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			rep := &lab.BenchReport{
				Machine: lab.BenchMachine{CPUs: 2, CPU: "AMD EPYC", GoVersion: "go1.26", OSArch: "linux/amd64", SQLite: "3.54.1", Postgres: "17.2"},
				Engine:  tt.engine, Server: "postgres://lab@localhost/lab", Synchronous: "NORMAL",
				RetryAbout: long("retry after a jittered pause"), PeakMemory: long("VmHWM from /proc/self/status"),
				FetchAheadAbout: long("River's shape, fenced"), RiverAbout: long("River v0.51.2 on riversqlite"),
				GoqiteAbout:  long("goqite v0.4.0 (maragu.dev/goqite)"),
				Ceiling:      lab.BenchCeiling{TxPerS: 43205, MsgsPerS: 21602, Transactions: 81936, Rounds: make([]float64, 8), Server: tt.server},
				CeilingAfter: lab.BenchCeiling{TxPerS: 43412, Server: tt.server},
			}
			for _, r := range rows {
				r.Server = tt.server
				rep.Rows = append(rep.Rows, r)
			}
			var b strings.Builder
			if err := BenchText(&b, rep); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for i, l := range strings.Split(out, "\n") {
				if n := textWidth(l); n > MaxLine {
					t.Errorf("line %d is %d columns: %q", i+1, n, l)
				}
			}
			for _, whole := range []string{"| fetch-ahead ", "| 0.03/0.09 ", "| 1.20/2.37 ", strings.TrimSpace(rep.GoqiteAbout)} {
				if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.TrimSpace(whole)) {
					t.Errorf("the report lacks %q whole:\n%s", whole, out)
				}
			}
			if got := strings.Count(out, "\n+-") / 3; got != tt.tables {
				t.Errorf("%d tables, want %d:\n%s", got, tt.tables, out)
			}
		})
	}
}
