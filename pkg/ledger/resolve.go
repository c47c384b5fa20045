package ledger

// Decision is an operator's resolution of an unknown or quarantined entry.
type Decision string

// Decisions. Accepted and rejected require transport evidence (an ack or
// provider reference); abandoned says the outcome stays unknown.
const (
	DecideAccepted  Decision = "accepted"
	DecideRejected  Decision = "rejected"
	DecideAbandoned Decision = "abandoned"
)

// CheckFreeText refuses operator text that could carry personal data or
// break a log line: an '@', a run of 7 or more digits (a phone number, when
// phones is set), control characters, or more than 500 bytes.
func CheckFreeText(field, v string, phones bool) error {
	if len(v) > 500 {
		return FieldErr(field, "too long (500 bytes at most)")
	}
	digits := 0
	for _, r := range v {
		switch {
		case r == '@':
			return FieldErr(field, "must not contain an email address")
		case r < 0x20 || r == 0x7f:
			return FieldErr(field, "contains a control character")
		case r >= '0' && r <= '9':
			digits++
			if phones && digits >= 7 {
				return FieldErr(field, "must not contain a phone number (7 or more digits in a row)")
			}
		case r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
			// separators inside a phone number keep the run going
		default:
			digits = 0
		}
	}
	return nil
}
