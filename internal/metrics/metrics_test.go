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

// TestEveryRecordCarriesTheStage: in Lambda, every record names the stage the function's name
// says, as a dimension of its metrics, with or without dimensions of its own; Stage, when set,
// wins; outside Lambda there is none.
func TestEveryRecordCarriesTheStage(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "resetledger-prod-eu-digest")
	for _, tc := range []struct {
		e        *Emitter
		dims     map[string]string
		want     string
		wantDims string
	}{
		{&Emitter{}, nil, "resetledger-prod-eu", `[["Stage"]]`},
		{&Emitter{}, map[string]string{"Sweep": "expire"}, "resetledger-prod-eu", `[["Stage","Sweep"]]`},
		{&Emitter{Stage: "resetledger-dev"}, map[string]string{"Stage": "forged"}, "resetledger-dev", `[["Stage"]]`},
	} {
		var buf bytes.Buffer
		tc.e.W = &buf
		before := len(tc.dims)
		if err := tc.e.Count(DigestsWritten, tc.dims, 1); err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		dims, _ := json.Marshal(rec["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"])
		if rec[DimStage] != tc.want || string(dims) != tc.wantDims {
			t.Errorf("dims %v: record %s, want Stage %q in %s", tc.dims, buf.String(), tc.want, tc.wantDims)
		}
		if len(tc.dims) != before || (tc.dims != nil && tc.dims["Stage"] == "resetledger-dev") {
			t.Errorf("the caller's dimensions were changed: %v", tc.dims)
		}
	}
	for name, want := range map[string]string{"resetledger-prod-digest": "resetledger-prod", "digest": "", "": "", "-x": ""} {
		if got := StageOf(name); got != want {
			t.Errorf("StageOf(%q) = %q, want %q", name, got, want)
		}
	}
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	var buf bytes.Buffer
	if err := (&Emitter{W: &buf}).Count(ContentMismatch, nil, 1); err != nil || bytes.Contains(buf.Bytes(), []byte(DimStage)) {
		t.Errorf("outside Lambda: %s (%v), want no Stage", buf.String(), err)
	}
}
