package main

import "testing"

// TestIntentQueue: the intent queue keeps intents an hour, hides a received one for six claim
// timeouts and dead-letters it after five receives; its DLQ keeps them 14 days.
func TestIntentQueue(t *testing.T) {
	s := synth(t, nil)
	dlq := s.logicalID(t, "AWS::SQS::Queue", "IntentDlq")
	hasWorkQueue(t, s, "intent queue", 3600, 180, dlq, 5, nil) // 180: 6 x claim's 30 s
	retainsTwoWeeks(t, s, dlq)
}

func TestClaimEventSource(t *testing.T) {
	s := synth(t, nil)
	hasQueueMapping(t, s, "claim SQS mapping",
		s.logicalID(t, "AWS::Lambda::Function", "ClaimFunction"), s.logicalID(t, "AWS::SQS::Queue", "IntentQueue"), 10)
}
