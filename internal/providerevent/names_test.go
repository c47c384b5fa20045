package providerevent

import (
	"testing"

	"github.com/resetledger/resetledger/internal/sestransport"
	"github.com/resetledger/resetledger/internal/smstransport"
)

// TestCorrelationNames: the decoder reads the names the transports write.
func TestCorrelationNames(t *testing.T) {
	for _, n := range []struct{ read, written string }{
		{sesTagIdempotencyKey, sestransport.TagIdempotencyKey},
		{sesTagAttempt, sestransport.TagAttempt},
		{sesTagAttemptProof, sestransport.TagAttemptProof},
		{smsContextIdempotencyKey, smstransport.ContextIdempotencyKey},
		{smsContextAttempt, smstransport.ContextAttempt},
		{smsContextAttemptProof, smstransport.ContextAttemptProof},
	} {
		if n.read != n.written {
			t.Errorf("the decoder reads %q where the transport writes %q", n.read, n.written)
		}
	}
}
