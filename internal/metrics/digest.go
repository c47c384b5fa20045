package metrics

// The digest function's metrics (no dimensions but the stage's, DimStage).
const (
	// DigestsWritten counts signed digests stored.
	DigestsWritten = "DigestsWritten"
	// DigestRows counts rows recorded in digests.
	DigestRows = "DigestRows"
	// DigestGaps counts gaps the digest function found and recorded in a
	// digest (stream records it never saw, or could not read). Any is an
	// alarm: the evidence has a hole that verify will report.
	DigestGaps = "DigestGaps"
	// DigestFailures counts batches the function could not digest (it
	// fails the batch, and Lambda retries it in order).
	DigestFailures = "DigestFailures"
)
