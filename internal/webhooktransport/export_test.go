package webhooktransport

import "time"

// Hooks for the external tests (package webhook_test), which use the test
// provider in webhooktest and so cannot live inside this package.

// MaxResponse is the response size cap.
const MaxResponse = maxResponse

// TimeoutOf returns the request timeout t applies.
func TimeoutOf(t *Transport) time.Duration { return t.cfg.Timeout }
