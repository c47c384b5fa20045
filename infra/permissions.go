package main

// A granted permission that no recorded run exercises fails TestIAMCoverage
// (iam_test.go) unless it is listed here with the reason it is granted
// anyway. The recorded runs are the pipeline tests and the release gate
// (every call the functions' SDK clients make), the deployed end-to-end run
// (every call the deployed functions logged), and the calls AWS makes with a
// function's role on its behalf (logs, event source polling, DynamoDB's use
// of the table key), which the test derives from the template.
var unexercisedGrants = []struct {
	Function string // construct name prefix of the role: Claim, Dispatch, Reconcile, Expire
	Action   string // the granted action, as written in the policy
	Why      string
}{
	{"Dispatch", "sms-voice:SendTextMessage",
		"The emulator has no End User Messaging SMS service, so no run sends through it; the SMS adapter's own tests " +
			"drive the real SDK against a local HTTP server. Granted on the configured origination identity, or on " +
			"this account's sms-voice resources when none is configured."},
	{"Reconcile", "dynamodb:GetItem",
		"Read-back after a conditional write failed or lost its response (ledger.Service.write recognizes its own " +
			"landed write) and the lookup of a held fallback channel when a row ends (settleSuccessor). Both run only " +
			"under faults or in fallback workflows that end during a sweep; the full-size release gate (make gate) reaches them."},
	{"Expire", "dynamodb:GetItem",
		"Read-back after a conditional write failed or lost its response (ledger.Service.write) and the lookup of a " +
			"held fallback channel when an expired row ends (settleSuccessor); reached under faults and by the full-size gate."},
}
