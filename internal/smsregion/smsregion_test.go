package smsregion_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"

	"github.com/resetledger/resetledger/internal/smsregion"
	"github.com/resetledger/resetledger/internal/smsregion/codes"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		number string
		region string
		kind   smsregion.Kind
	}{
		{"+447400123456", "GB", smsregion.Mobile},
		{"+449012345678", "GB", smsregion.PremiumRate},
		{"+448001234567", "GB", smsregion.TollFree},
		{"+441481256789", "GG", smsregion.FixedLine}, // +44 shared by GB, GG, JE, IM
		{"+12015550123", "US", smsregion.FixedLineOrMobile},
		{"+19002345678", "US", smsregion.PremiumRate},
		{"+14165550123", "CA", smsregion.FixedLineOrMobile}, // +1 shared by the NANP regions
		{"+17875550123", "PR", smsregion.FixedLineOrMobile},
		{"+4915123456789", "DE", smsregion.Mobile},
		{"+499001234567", "DE", smsregion.PremiumRate},
		{"+4918012345", "DE", smsregion.SharedCost},
		{"+33612345678", "FR", smsregion.Mobile},
		{"+33891123456", "FR", smsregion.PremiumRate},
		{"+33884012345", "FR", smsregion.SharedCost},
		{"+5511961234567", "BR", smsregion.Mobile},
		{"+918123456789", "IN", smsregion.Mobile},
		{"+61412345678", "AU", smsregion.Mobile},
		{"+611900123456", "AU", smsregion.PremiumRate},
		{"+819012345678", "JP", smsregion.Mobile},
		{"+37061234567", "LT", smsregion.Mobile},
		{"+37090012345", "LT", smsregion.PremiumRate},
		{"+25271123456", "SO", smsregion.Mobile},
	}
	for _, tt := range tests {
		t.Run(tt.region+"/"+tt.kind.String(), func(t *testing.T) {
			got, err := smsregion.Lookup(tt.number)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if got.Region != tt.region || got.Kind != tt.kind {
				t.Errorf("Lookup = %s/%s, want %s/%s", got.Region, got.Kind, tt.region, tt.kind)
			}
			region, err := smsregion.Region(tt.number)
			if err != nil || region != tt.region {
				t.Errorf("Region = %q, %v; want %q", region, err, tt.region)
			}
			if want := tt.kind == smsregion.PremiumRate || tt.kind == smsregion.SharedCost; got.Kind.Premium() != want {
				t.Errorf("Premium() = %v, want %v", got.Kind.Premium(), want)
			}
		})
	}
}

func TestLookupRefuses(t *testing.T) {
	tests := []struct {
		name   string
		number string
		want   error
	}{
		{"empty", "", smsregion.ErrInvalidNumber},
		{"no plus", "447400123456", smsregion.ErrInvalidNumber},
		{"spaces", "+44 7400 123456", smsregion.ErrInvalidNumber},
		{"dashes", "+1-201-555-0123", smsregion.ErrInvalidNumber},
		{"letters", "+1800FLOWERS", smsregion.ErrInvalidNumber},
		{"leading zero country code", "+0447400123456", smsregion.ErrInvalidNumber},
		{"16 digits", "+4474001234567890", smsregion.ErrInvalidNumber},
		{"unassigned country code", "+999123456789", smsregion.ErrInvalidNumber},
		{"too short for its region", "+1900", smsregion.ErrInvalidNumber},
		{"outside every range", "+440123456789", smsregion.ErrInvalidNumber},
		{"non-geographic freephone", "+80012345678", smsregion.ErrNoRegion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := smsregion.Lookup(tt.number)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Lookup err = %v, want %v", err, tt.want)
			}
			if got != (smsregion.Number{}) {
				t.Errorf("Lookup returned %+v with an error", got)
			}
			noDigitsOf(t, err.Error(), tt.number)
		})
	}
}

// noDigitsOf fails if text carries number (when it has a digit) or a run
// of 4 of its digits.
func noDigitsOf(t *testing.T, text, number string) {
	t.Helper()
	if strings.ContainsAny(number, "0123456789") && strings.Contains(text, number) {
		t.Errorf("error text %q contains the number", text)
	}
	for _, run := range regexp.MustCompile(`[0-9]{4,}`).FindAllString(number, -1) {
		if strings.Contains(text, run[:4]) {
			t.Errorf("error text %q contains digits of the number", text)
		}
	}
}

func TestKnownRegions(t *testing.T) {
	regions := smsregion.KnownRegions()
	if !slices.IsSorted(regions) {
		t.Error("KnownRegions is not sorted")
	}
	for _, r := range []string{"GB", "US", "PR", "GG", "DE", "XK"} {
		if !slices.Contains(regions, r) || !smsregion.KnownRegion(r) {
			t.Errorf("%s is not known", r)
		}
	}
	for _, r := range regions {
		if !regexp.MustCompile(`^[A-Z]{2}$`).MatchString(r) {
			t.Errorf("known region %q is not two uppercase letters", r)
		}
	}
	for _, r := range []string{"001", "ZZ", "UK", "gb", "", "G"} {
		if smsregion.KnownRegion(r) {
			t.Errorf("%q is known", r)
		}
	}
}

func TestParseAllowList(t *testing.T) {
	tests := []struct {
		text    string
		off     bool
		regions []string
		str     string
	}{
		{"", true, nil, "*"},
		{"   ", true, nil, "*"},
		{"*", true, nil, "*"},
		{" * ", true, nil, "*"},
		{"GB", false, []string{"GB"}, "GB"},
		{"US,GB,IE", false, []string{"GB", "IE", "US"}, "GB,IE,US"},
		{" US , GB ", false, []string{"GB", "US"}, "GB,US"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.text), func(t *testing.T) {
			a, err := smsregion.ParseAllowList(tt.text)
			if err != nil {
				t.Fatalf("ParseAllowList: %v", err)
			}
			if a.Off() != tt.off || !slices.Equal(a.Regions(), tt.regions) || a.String() != tt.str {
				t.Errorf("got off=%v regions=%v string=%q; want off=%v regions=%v string=%q",
					a.Off(), a.Regions(), a.String(), tt.off, tt.regions, tt.str)
			}
			back, err := smsregion.ParseAllowList(a.String())
			if err != nil || back.String() != a.String() {
				t.Errorf("String does not read back: %q, %v", back.String(), err)
			}
		})
	}
}

func TestParseAllowListRefuses(t *testing.T) {
	for _, text := range []string{
		"gb", "Gb", "GBR", "G", "UK", "ZZ", "001", "GB,,US", "GB,", ",GB", "GB,GB", "US,GB,US",
		"GB,*", "*,GB", "GB;US", "GB US", "+447400123456",
	} {
		t.Run(fmt.Sprintf("%q", text), func(t *testing.T) {
			a, err := smsregion.ParseAllowList(text)
			if !errors.Is(err, smsregion.ErrInvalidAllowList) {
				t.Fatalf("ParseAllowList err = %v, want ErrInvalidAllowList", err)
			}
			if !a.Off() {
				t.Errorf("a refused list is not the zero value: %v", a)
			}
			noDigitsOf(t, err.Error(), text)
		})
	}
}

func TestAllows(t *testing.T) {
	on, err := smsregion.ParseAllowList("GB,US")
	if err != nil {
		t.Fatal(err)
	}
	off, err := smsregion.ParseAllowList("*")
	if err != nil {
		t.Fatal(err)
	}
	var zero smsregion.AllowList
	tests := []struct {
		region      string
		on, off, zr bool
	}{
		{"GB", true, true, true},
		{"US", true, true, true},
		{"PR", false, true, true}, // +1 but not US
		{"GG", false, true, true}, // +44 but not GB
		{"gb", false, true, true},
		{"", false, true, true},
		{"FR", false, true, true},
	}
	for _, tt := range tests {
		if got := on.Allows(tt.region); got != tt.on {
			t.Errorf("GB,US allows %q = %v", tt.region, got)
		}
		if got := off.Allows(tt.region); got != tt.off {
			t.Errorf("* allows %q = %v", tt.region, got)
		}
		if got := zero.Allows(tt.region); got != tt.zr {
			t.Errorf("zero value allows %q = %v", tt.region, got)
		}
	}
}

// TestAllowListEndToEnd runs numbers through Lookup and an allow-list, the
// way dispatch decides.
func TestAllowListEndToEnd(t *testing.T) {
	a, err := smsregion.ParseAllowList("GB,IE")
	if err != nil {
		t.Fatal(err)
	}
	for number, want := range map[string]bool{
		"+447400123456": true,
		"+353851234567": true,
		"+441481256789": false, // GG
		"+12015550123":  false,
		"+25271123456":  false,
	} {
		region, err := smsregion.Region(number)
		if err != nil {
			t.Fatalf("Region: %v", err)
		}
		if got := a.Allows(region); got != want {
			t.Errorf("GB,IE allows a %s number = %v, want %v", region, got, want)
		}
	}
}

func TestKindString(t *testing.T) {
	seen := map[string]bool{}
	for k := smsregion.Unknown; k <= smsregion.Voicemail; k++ {
		s := k.String()
		if s == "" || strings.HasPrefix(s, "kind(") || seen[s] {
			t.Errorf("kind %d has name %q", int(k), s)
		}
		seen[s] = true
	}
	if len(codes.KindNames) != int(smsregion.Voicemail)+1 {
		t.Errorf("codes.KindNames has %d names for %d kinds", len(codes.KindNames), int(smsregion.Voicemail)+1)
	}
	if _, err := codes.ParseKindList(smsregion.DefaultKinds); err != nil {
		t.Errorf("DefaultKinds: %v", err)
	}
	if got := smsregion.Kind(99).String(); got != "kind(99)" {
		t.Errorf("Kind(99) = %q", got)
	}
}

// TestCodesAreTheLibrarys: package codes' copy of the known regions is the
// library's own list (GetSupportedRegions less "001"); it fails after a
// library upgrade until the copy is regenerated.
func TestCodesAreTheLibrarys(t *testing.T) {
	var lib []string
	for r := range phonenumbers.GetSupportedRegions() {
		if r != "001" {
			lib = append(lib, r)
		}
	}
	slices.Sort(lib)
	if got := codes.All(); !slices.Equal(got, lib) {
		t.Errorf("codes has %d regions, the library %d: regenerate internal/smsregion/codes/known.go", len(got), len(lib))
	}
}
