package dynamostore

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// phrases are the texts the ledger builds its reasons from, parts of
// operator workers' names and the providers' not-sent codes. Form 2 stores
// a reason, a not-sent code (or a worker that is not a function's) that
// holds them as bytes in which each phrase is a NUL and
// its index here (packText): the reasons policy writes into quarantined and
// expired rows are long and few. The list is part of the stored form:
// append only, never edit an entry. Index 0 stands for a NUL in the text.
var phrases = []string{
	"",
	"no provider event within the settle period of ",
	", and the transport has no idempotency key or lookup; outcome unknown, needs an operator decision",
	"transport has no idempotency key or lookup; outcome unknown, needs an operator decision",
	"same-key retry budget of ",
	" attempts spent; outcome unknown",
	"same-key retry not allowed: challenge expired; outcome unknown",
	"transport idempotency window passed, or would before a retry could finish within its lease; outcome unknown",
	"same-key retry impossible: sealed content unavailable; outcome unknown",
	"same-key retry not made: challenge expired before it could start; outcome unknown",
	"abandoned, outcome unknown: ",
	"operator decision with transport evidence: ",
	"no acknowledgement: ",
	"retry after not sent: ",
	"challenge already expired when the intent arrived",
	"challenge expired before dispatch",
	"challenge expired before the send started; nothing sent",
	"challenge expired while claimed; never dispatched",
	"challenge expired while held for the earlier fallback channel",
	"lease expired without a recorded outcome",
	"sealed content unavailable or failed verification; nothing sent",
	"provider event ",
	" is transport evidence that the message was accepted; resolved without an operator",
	"reconcile: lookup found nothing yet; waiting for the settle period",
	"reconcile: no provider event yet; waiting for the settle period",
	"reconcile: same-key retry",
	"reconcile: transport lookup found the message",
	"transport did not take the message: ",
	"; next attempt at ",
	"fallback not needed: ",
	"fallback: ",
	" reached (window from ",
	"); nothing sent",
	"not sent before the challenge expired: ",
	"waiting for the send-rate budget: send booked at ",
	" was accepted, then the provider reported a permanent delivery failure: ",
	"provider reported ",
	"read response: connection reset",
	"context deadline exceeded",
	"operator:arn:aws:sts::",
	":assumed-role/",
	"operator:arn:aws:iam::",
	"TooManyRequestsException",
	"ThrottlingException",
	"ServiceQuotaExceededException",
	"SendingPausedException",
	"LimitExceededException",
	"send_rate_budget",
}

// packText stores v as phrase-coded bytes when that is shorter, else as
// text ("" as NULL).
func packText(v string) types.AttributeValue {
	b := phraseBytes(v)
	if b == nil {
		return text(v)
	}
	return &types.AttributeValueMemberB{Value: b}
}

// phraseBytes codes v, or returns nil if coding would not shorten it.
func phraseBytes(v string) []byte {
	var out []byte
	for i := 0; i < len(v); {
		best := 0
		for j, p := range phrases[1:] {
			if len(p) > len(phrases[best]) && strings.HasPrefix(v[i:], p) {
				best = j + 1
			}
		}
		switch {
		case best > 0:
			out = append(out, 0, byte(best))
			i += len(phrases[best])
		case v[i] == 0:
			out = append(out, 0, 0)
			i++
		default:
			out = append(out, v[i])
			i++
		}
	}
	if len(out) >= len(v) {
		return nil
	}
	return out
}

// unpackText reads what phraseBytes wrote.
func unpackText(b []byte) (string, bool) {
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			sb.WriteByte(b[i])
			continue
		}
		if i+1 >= len(b) || int(b[i+1]) >= len(phrases) {
			return "", false
		}
		if b[i+1] == 0 {
			sb.WriteByte(0)
		} else {
			sb.WriteString(phrases[b[i+1]])
		}
		i++
	}
	return sb.String(), true
}

// packBy stores a worker: a function's with a request id as packWorker
// does, any other phrase-coded after a NUL when that is shorter (no packed
// worker starts with one), else as text.
func packBy(w string) types.AttributeValue {
	if len(w) > 0 && w[0] != 0 {
		if v, ok := packWorker(w).(*types.AttributeValueMemberB); ok {
			return v
		}
	}
	if b := phraseBytes(w); b != nil && len(b)+1 < len(w) {
		return &types.AttributeValueMemberB{Value: append([]byte{0}, b...)}
	}
	return text(w)
}

// unpackBy reads what packBy wrote.
func unpackBy(b []byte) (string, bool) {
	if len(b) > 0 && b[0] == 0 {
		return unpackText(b[1:])
	}
	return unpackWorker(b)
}
