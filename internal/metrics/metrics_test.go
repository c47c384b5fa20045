package metrics

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestEmitWritesEMF(t *testing.T) {
	var buf bytes.Buffer
	e := &Emitter{W: &buf, Now: func() time.Time { return time.UnixMilli(1700000000000) }}
	if err := e.Count(Transitions, map[string]string{"State": "accepted", "Channel": "sms"}, 2); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Aws struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		State       string
		Channel     string
		Transitions float64
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	m := rec.Aws.CloudWatchMetrics
	if rec.Aws.Timestamp != 1700000000000 || len(m) != 1 || m[0].Namespace != Namespace ||
		len(m[0].Dimensions) != 1 || len(m[0].Dimensions[0]) != 2 || m[0].Dimensions[0][0] != "Channel" ||
		m[0].Metrics[0].Name != Transitions || m[0].Metrics[0].Unit != "Count" ||
		rec.Transitions != 2 || rec.State != "accepted" || rec.Channel != "sms" {
		t.Fatalf("bad EMF record: %s", buf.String())
	}
}

func TestEmitWithoutDimensionsHasEmptyDimensionSet(t *testing.T) {
	var buf bytes.Buffer
	e := &Emitter{W: &buf}
	if err := e.Count(ContentMismatch, nil, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"Dimensions":[[]]`)) {
		t.Fatalf("want an empty dimension set: %s", buf.String())
	}
}
