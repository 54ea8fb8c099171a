package cast

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/provider"
	"github.com/outboxlab/outboxlab/store"
)

// LessonStart is when the Day 15 workers start on the scenario clock,
// 2026-01-15T09:00:00.000Z; the later lessons count their time from it.
var LessonStart = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// The actors' names.
const (
	WorkerA  = "Worker-A"
	WorkerB  = "Worker-B"
	Checkout = "checkout"
)

// SeedPayments are the six payments of Days 14 and 15.
var SeedPayments = []store.NewPayment{
	{Key: "PAY-001", AmountCents: 2500},
	{Key: "PAY-002", AmountCents: 4200},
	{Key: "PAY-003", AmountCents: 1999},
	{Key: "PAY-004", AmountCents: 12000},
	{Key: "PAY-005", AmountCents: 750},
	{Key: "PAY-006", AmountCents: 3100},
}

// Opener opens one application instance's own connection to the database
// at path. A lesson passes its run's Env.Open, so that every connection an
// actor opens records into the run's statement ledger.
type Opener func(ctx context.Context, path string) (*store.DB, error)

// PaymentCreated is p as checkout writes it: a PaymentCreated message
// whose payload holds the key and the amount.
func PaymentCreated(p store.NewPayment) store.NewPayment {
	p.MessageType = "PaymentCreated"
	p.Payload = fmt.Sprintf(`{"key":%q,"amountCents":%d}`, p.Key, p.AmountCents)
	return p
}

// CheckoutInstance is the application instance that takes payments: it
// writes each payment and its outbox message through its payments service
// and, only once the write has committed, registers the payment at the
// provider. A crashed write never reaches the provider.
type CheckoutInstance struct {
	Payments *store.Payments
	Provider *provider.Provider
}

// Pay writes p at now and then registers it at the provider. crashHere is
// the failpoint between the payment and the outbox insert (nil: none); a
// crash returns an error wrapping [store.ErrCrashed].
func (c CheckoutInstance) Pay(ctx context.Context, p store.NewPayment, now time.Time, crashHere func() bool) error {
	if _, err := c.Payments.Create(ctx, p, now, crashHere); err != nil {
		return err
	}
	c.Provider.Create(Checkout, p.Key)
	return nil
}
