-- Day 14: a payment and its outbox message are written in one transaction.
CREATE TABLE Payments (
    Id             INTEGER PRIMARY KEY,
    IdempotencyKey TEXT    NOT NULL UNIQUE,
    AmountCents    INTEGER NOT NULL CHECK (AmountCents > 0),
    PaymentStatus  TEXT    NOT NULL DEFAULT 'Pending'
                   CHECK (PaymentStatus IN ('Pending', 'Paid', 'Failed')),
    TransactionId  TEXT,   -- the provider's id; NULL unless Paid
    CreatedAtUtc   TEXT    NOT NULL,
    UpdatedAtUtc   TEXT    NOT NULL
);

CREATE TABLE OutboxMessages (
    Id             INTEGER PRIMARY KEY,
    MessageType    TEXT NOT NULL,
    AggregateKey   TEXT NOT NULL, -- the payment's IdempotencyKey
    Payload        TEXT NOT NULL,
    Status         TEXT NOT NULL DEFAULT 'Pending', -- Pending | Processed (Day 15 adds Processing)
    CreatedAtUtc   TEXT NOT NULL,
    ProcessedAtUtc TEXT
);

CREATE INDEX IX_OutboxMessages_Status_CreatedAtUtc ON OutboxMessages (Status, CreatedAtUtc);
