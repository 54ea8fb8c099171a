package store

// Statements no lesson teaches and no variant runs: the breakers that two
// lessons' proofs share (each lesson's own stay in its folder's
// proofs.go), each swapped into a lesson's set to show a check no variant
// breaks can fail.
var (
	// ApplyInverted stores every payment outcome the wrong way round.
	ApplyInverted = Stmt{Name: "test: store the opposite outcome", SQL: `UPDATE Payments
SET PaymentStatus = CASE :status WHEN 'Paid' THEN 'Failed' ELSE 'Paid' END, UpdatedAtUtc = :now
WHERE IdempotencyKey = :key`}
	// FinalizeByCopy "finalizes" a message by inserting a Processed copy
	// of its row.
	FinalizeByCopy = Stmt{Name: "test: finalize by inserting a Processed copy", SQL: `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
SELECT MessageType, AggregateKey, Payload, 'Processed', :now FROM OutboxMessages WHERE Id = :id`}
)
