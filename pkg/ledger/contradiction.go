package ledger

import (
	"slices"
	"time"
)

// Contradiction names the fields in which image, an entry as an event
// delivered it, differs from row, the entry as the table holds it. An image
// older than the row (a stale or repeated delivery) is no contradiction:
// the row has moved on, and decisions are made from the row. An image at
// the row's version must equal it, and one at a later version was never
// written. nil means no contradiction.
func Contradiction(image, row Entry) []string {
	if image.Key != row.Key {
		return []string{"key"}
	}
	if image.Version < row.Version {
		return nil
	}
	if image.Version > row.Version {
		return []string{"version"}
	}
	var diff []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"identity", image.Identity == row.Identity},
		{"workflow", image.Workflow.Kind == row.Workflow.Kind && slices.Equal(image.Workflow.Order, row.Workflow.Order)},
		{"state", image.State == row.State},
		{"content_hash", image.ContentHash == row.ContentHash},
		{"destination_ref", image.DestinationRef == row.DestinationRef},
		{"subject_ref", image.SubjectRef == row.SubjectRef},
		{"template", image.TemplateID == row.TemplateID && image.TemplateVersion == row.TemplateVersion},
		{"policy_version", image.PolicyVersion == row.PolicyVersion},
		{"issued_at", image.IssuedAt.Equal(row.IssuedAt)},
		{"expires_at", image.ExpiresAt.Equal(row.ExpiresAt)},
		{"times", sameTimes(image, row)},
		{"not_sent_code", image.NotSentCode == row.NotSentCode},
		{"attempts", image.Attempts == row.Attempts && image.AckID == row.AckID},
		{"history_head", len(image.History) == len(row.History) && image.Last().Hash == row.Last().Hash},
	} {
		if !f.same {
			diff = append(diff, f.name)
		}
	}
	return diff
}

// sameTimes reports whether the times that schedule the entry agree.
func sameTimes(a, b Entry) bool {
	pairs := [][2]time.Time{
		{a.CreatedAt, b.CreatedAt}, {a.UpdatedAt, b.UpdatedAt}, {a.RedriveAt, b.RedriveAt},
		{a.LeaseUntil, b.LeaseUntil}, {a.NextCheckAt, b.NextCheckAt}, {a.NextAttemptAt, b.NextAttemptAt},
		{a.SlotAt, b.SlotAt}, {a.RetainUntil, b.RetainUntil},
	}
	for _, p := range pairs {
		if !p[0].Equal(p[1]) {
			return false
		}
	}
	return true
}
