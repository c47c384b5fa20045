package dynamostore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
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

// TestForm2RoundTrips: every sample row, and every prefix of its history
// as the row was after each write, decodes from form 2 to the very entry
// that was encoded, through the item and through its stream image; and
// each prefix's item is the form-1 row's size or smaller.
func TestForm2RoundTrips(t *testing.T) {
	st := New(nil, "t", DefaultShards)
	samples := sampleEntries(400)
	fs, err := readFixtures(v1Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		e, err := DecodeImage(f.Image)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, e)
	}
	derived := map[string]int{} // reasons left out, by their first word
	for i, want := range samples {
		item := st.item(want)
		for j, h := range item[attrHistory].(*types.AttributeValueMemberL).Value {
			if _, ok := h.(*types.AttributeValueMemberM).Value[evReason]; !ok && want.History[j].Reason != "" {
				derived[strings.Fields(want.History[j].Reason)[0]]++
			}
		}
		if _, ok := item[attrForm]; !ok {
			t.Fatalf("%s: no form marker", sampleName(i, want))
		}
		for _, decoded := range []func() (ledger.Entry, error){
			func() (ledger.Entry, error) { return decode(item) },
			func() (ledger.Entry, error) { return DecodeImage(imageOf(item)) },
		} {
			got, err := decoded()
			if err != nil {
				t.Fatalf("%s: %v", sampleName(i, want), err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%s did not round-trip:\nwant %+v\ngot  %+v", sampleName(i, want), want, got)
			}
		}
	}
	for _, first := range []string{"intent", "dispatch", "transport", "retry", "provider"} { // every derived reason
		if derived[first] == 0 {
			t.Errorf("no sample entry leaves out a reason starting %q: %v", first, derived)
		}
	}
}

// TestPhrasesRoundTrip: phrase-coded text reads back byte for byte,
// NULs and every phrase included, and is stored coded only when shorter.
func TestPhrasesRoundTrip(t *testing.T) {
	cases := []string{"", "\x00", "a\x00b", "\x00\x00" + phrases[3], "x" + phrases[1] + "5m0s" + phrases[2] + "\x00"}
	for i, p := range phrases[1:] {
		cases = append(cases, p, p[:len(p)-1], "é"+p+phrases[1+(i+7)%(len(phrases)-1)])
	}
	for _, v := range cases {
		switch a := packText(v).(type) {
		case *types.AttributeValueMemberB:
			got, ok := unpackText(a.Value)
			if !ok || got != v || len(a.Value) >= len(v) {
				t.Errorf("%q: coded %d bytes, read back %q", v, len(a.Value), got)
			}
		case *types.AttributeValueMemberS:
			if a.Value != v || phraseBytes(v) != nil {
				t.Errorf("%q stored as text %q", v, a.Value)
			}
		case *types.AttributeValueMemberNULL:
			if v != "" {
				t.Errorf("%q stored as NULL", v)
			}
		}
		if b, ok := packBy(v).(*types.AttributeValueMemberB); ok {
			if got, ok := unpackBy(b.Value); !ok || got != v {
				t.Errorf("worker %q read back %q", v, got)
			}
		}
	}
	if _, ok := unpackText([]byte{0, byte(len(phrases))}); ok {
		t.Error("an unknown phrase index reads")
	}
}

// TestDigestsDocDescribesForm2: docs/digests.md §2.1, which a verifier
// outside this package reads rows by, lists the phrases, state codes and
// kind codes form 2 stores, in order.
func TestDigestsDocDescribesForm2(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "digests.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^([0-9]+)\\. `\"(.*)\"`$").FindAllStringSubmatch(doc, -1) {
		if m[1] != strconv.Itoa(len(listed)+1) {
			t.Fatalf("phrase %s listed as number %d", m[1], len(listed)+1)
		}
		listed = append(listed, m[2])
	}
	if !reflect.DeepEqual(listed, phrases[1:]) {
		t.Fatalf("docs/digests.md lists the phrases\n%q\nform 2 has\n%q", listed, phrases[1:])
	}
	for i, st := range stateCodes {
		name := string(st)
		if st == ledger.None {
			name = "none"
		}
		if !strings.Contains(doc, fmt.Sprintf("%d `%s`", i, name)) {
			t.Errorf("docs/digests.md does not give state %s code %d", name, i)
		}
	}
	for i, k := range kindCodes {
		if !strings.Contains(doc, fmt.Sprintf("%d `%s`", i, k)) {
			t.Errorf("docs/digests.md does not give kind %s code %d", k, i)
		}
	}
}
