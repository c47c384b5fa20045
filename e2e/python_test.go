package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// pythonProducer is the Python producer package; make python-producer
// installs its pinned dependencies into pythonVenv.
var (
	pythonProducer = filepath.Join("..", "producers", "python")
	pythonVenv     = filepath.Join("..", ".venv", "python-producer")
)

// pythonInput is a producerInput as producers/python/examples/publish_json.py
// reads it: the intent's member names.
type pythonInput struct {
	ChallengeID     string          `json:"challenge_id"`
	Channel         string          `json:"channel"`
	Workflow        any             `json:"workflow"`
	DestinationRef  string          `json:"destination_ref"`
	SubjectRef      string          `json:"subject_ref,omitempty"`
	ExpiresAt       string          `json:"expires_at"`
	TemplateID      string          `json:"template_id"`
	TemplateVersion string          `json:"template_version"`
	PolicyVersion   string          `json:"policy_version"`
	Message         producerMessage `json:"message"`
}

// pythonResult is a producerResult as the script prints it.
type pythonResult struct {
	ChallengeID string `json:"challenge_id"`
	Channel     string `json:"channel"`
	DedupeKey   string `json:"dedupe_key"`
	ContentHash string `json:"content_hash"`
	MessageID   string `json:"message_id"`
	Attempts    int    `json:"attempts"`
	Error       any    `json:"error"`
}

// pythonPublisher runs the Python producer's publish example.
var pythonPublisher = publisher{
	name: "Python", tag: "python", precision: time.Microsecond, subjectRefs: true,
	command: func(e *env) ([]string, []string, error) {
		python := filepath.Join(pythonVenv, "bin", "python")
		_, err := os.Stat(python)
		if err == nil {
			err = exec.Command(python, "-c", "import boto3, cryptography").Run()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the Python producer's venv is not installed (%v); run make python-producer", err)
		}
		src, err := filepath.Abs(filepath.Join(pythonProducer, "src"))
		if err != nil {
			return nil, nil, err
		}
		// boto3 reads the region from AWS_DEFAULT_REGION (not AWS_REGION).
		return []string{python, filepath.Join(pythonProducer, "examples", "publish_json.py")},
			[]string{"PYTHONPATH=" + src, "AWS_DEFAULT_REGION=" + e.cfg.Region}, nil
	},
	form: names[pythonInput, pythonResult]{},
}

// TestPythonProducerEndToEnd runs testProducer with the Python producer
// (producers/python, run with the venv's python), the email and the
// fallback pair with a subject_ref.
func TestPythonProducerEndToEnd(t *testing.T) {
	testProducer(t, pythonPublisher)
}
