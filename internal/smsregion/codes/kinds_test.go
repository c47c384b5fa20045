package codes_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/smsregion/codes"
)

func TestParseKindList(t *testing.T) {
	for _, tc := range []struct {
		text  string
		off   bool
		kinds []string
		str   string
	}{
		{"*", true, nil, "*"},
		{" mobile , fixed_line_or_mobile ", false, []string{"fixed_line_or_mobile", "mobile"}, "fixed_line_or_mobile,mobile"},
		{"mobile", false, []string{"mobile"}, "mobile"},
	} {
		k, err := codes.ParseKindList(tc.text)
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if k.Off() != tc.off || !slices.Equal(k.Kinds(), tc.kinds) || k.String() != tc.str {
			t.Errorf("%q: off %v kinds %v %q", tc.text, k.Off(), k.Kinds(), k.String())
		}
	}
	k, _ := codes.ParseKindList("mobile,fixed_line_or_mobile")
	for kind, want := range map[string]bool{"mobile": true, "fixed_line_or_mobile": true, "premium_rate": false, "shared_cost": false, "fixed_line": false, "": false} {
		if k.Allows(kind) != want {
			t.Errorf("allows %q = %v, want %v", kind, !want, want)
		}
	}
	if !(codes.KindList{}).Allows("premium_rate") {
		t.Error("the zero list (off) refuses a kind")
	}
	for _, bad := range []string{"", "mobile,", "mobile,mobile", "Mobile", "mobile,*", "+4490"} {
		_, err := codes.ParseKindList(bad)
		if !errors.Is(err, codes.ErrInvalidKindList) {
			t.Errorf("%q: %v, want ErrInvalidKindList", bad, err)
		}
		if bad != "" && err != nil && strings.Contains(err.Error(), bad) {
			t.Errorf("%q: the error quotes the text: %v", bad, err)
		}
	}
}
