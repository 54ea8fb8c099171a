package store

import "context"

// processedIDs reads the Ids of the messages a bench finalized: what the
// end-to-end relay bench looks for in the broker's stream.
var processedIDs = audit("audit: the Ids of the processed messages", `SELECT Id FROM OutboxMessages WHERE Status = 'Processed' ORDER BY Id`)

// ProcessedIDs are the Ids of the Processed messages, in order.
func (db *DB) ProcessedIDs(ctx context.Context) ([]int64, error) {
	return scanIDs(db.sql.QueryContext(ctx, processedIDs.SQL))
}
