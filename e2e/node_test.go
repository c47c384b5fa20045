package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeProducer is the Node.js producer package, built by make node-producer.
var nodeProducer = filepath.Join("..", "producers", "node")

// nodeInput is a producerInput as producers/node/examples/publish-json.mjs
// reads it: the package's Notification.
type nodeInput struct {
	ChallengeID     string          `json:"challengeId"`
	Channel         string          `json:"channel"`
	Workflow        any             `json:"workflow"`
	DestinationRef  string          `json:"destinationRef"`
	SubjectRef      string          `json:"subjectRef,omitempty"`
	ExpiresAt       string          `json:"expiresAt"`
	TemplateID      string          `json:"templateId"`
	TemplateVersion string          `json:"templateVersion"`
	PolicyVersion   string          `json:"policyVersion"`
	Message         producerMessage `json:"message"`
}

// nodeResult is a producerResult as the script prints it.
type nodeResult struct {
	ChallengeID string `json:"challengeId"`
	Channel     string `json:"channel"`
	DedupeKey   string `json:"dedupeKey"`
	ContentHash string `json:"contentHash"`
	MessageID   string `json:"messageId"`
	Attempts    int    `json:"attempts"`
	Error       any    `json:"error"`
}

// nodePublisher runs the Node.js producer's publish example.
var nodePublisher = publisher{
	name: "Node.js", tag: "node", precision: time.Millisecond,
	command: func(*env) ([]string, []string, error) {
		node, err := exec.LookPath("node")
		if err == nil {
			_, err = os.Stat(filepath.Join(nodeProducer, "dist", "index.js"))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the Node.js producer is not built (%v); run make node-producer", err)
		}
		return []string{node, filepath.Join(nodeProducer, "examples", "publish-json.mjs")}, nil, nil
	},
	form: names[nodeInput, nodeResult]{},
}

// TestNodeProducerEndToEnd runs testProducer with the Node.js producer
// (producers/node, run with node).
func TestNodeProducerEndToEnd(t *testing.T) {
	testProducer(t, nodePublisher)
}
