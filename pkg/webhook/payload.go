// Package webhook is the contract of the webhook transport's requests, for
// a receiver: the JSON payload of a send (Payload), the receipt it answers
// (Receipt), and the signature every request carries (Sign, Verify). The
// transport itself is internal/webhooktransport.
package webhook

import "time"

// Payload is the JSON body of a send. A receiver decodes the same type (webhooktest.Provider does).
type Payload struct {
	IdempotencyKey string    `json:"idempotency_key"`
	ContentHash    string    `json:"content_hash"`
	Channel        string    `json:"channel"`
	Attempt        int       `json:"attempt"`
	ExpiresAt      time.Time `json:"expires_at"`
	To             string    `json:"to"`
	Subject        string    `json:"subject,omitempty"`
	Body           string    `json:"body"`
}

// Receipt is the JSON body of a successful send or lookup.
type Receipt struct {
	ID string `json:"id"`
}
