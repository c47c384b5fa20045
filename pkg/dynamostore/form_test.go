package dynamostore

import (
	"encoding/json"
	"testing"
)

// TestV1RowsStillRead: rows and stream images written in the first stored
// form (testdata/v1-rows.json, written by that form's encoder) decode to
// the very entries that form's decoder read from them, through both
// DecodeImage and DecodeItem.
func TestV1RowsStillRead(t *testing.T) {
	fs, err := readFixtures(v1Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) < 20 {
		t.Fatalf("%d fixtures", len(fs))
	}
	for _, f := range fs {
		fromImage, err := DecodeImage(f.Image)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		fromItem, err := DecodeItem(ItemFromImage(f.Image))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for _, got := range []any{fromImage, fromItem} {
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != string(f.Entry) {
				t.Fatalf("%s: decoded\n%s\nwant\n%s", f.Name, b, f.Entry)
			}
		}
		if err := fromImage.Verify(); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
	}
}
