package scenarios

// registry lists every scenario in course order. Adding a lesson is one new
// file in this folder plus one line here.
var registry = []*Scenario{
	&transactionalOutbox,
	&competingWorkersNoClaim,
	&outboxLeasing,
	&lateFinalize,
	&staleAckFencing,
	&leaseRenewal,
	&leaseExpiryAfterSend,
	&failureClasses,
	&inboxRetention,
	&claimsAtScale,
	&batchCompletion,
	&heartbeatAndShutdown,
	&clocksAndOutages,
	&interleavingExplorer,
}
