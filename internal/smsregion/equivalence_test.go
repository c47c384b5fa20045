package smsregion

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// The library-based lookup Lookup was before it read the generated metadata:
// the reference the generated lookup must agree with.

var refE164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

var refKinds = map[phonenumbers.PhoneNumberType]Kind{
	phonenumbers.FIXED_LINE:           FixedLine,
	phonenumbers.MOBILE:               Mobile,
	phonenumbers.FIXED_LINE_OR_MOBILE: FixedLineOrMobile,
	phonenumbers.TOLL_FREE:            TollFree,
	phonenumbers.PREMIUM_RATE:         PremiumRate,
	phonenumbers.SHARED_COST:          SharedCost,
	phonenumbers.VOIP:                 VoIP,
	phonenumbers.PERSONAL_NUMBER:      Personal,
	phonenumbers.PAGER:                Pager,
	phonenumbers.UAN:                  UAN,
	phonenumbers.VOICEMAIL:            Voicemail,
}

// refLookup is Lookup as it was, through the library.
func refLookup(number string) (Number, error) {
	if !refE164.MatchString(number) {
		return Number{}, fmt.Errorf("%w: want E.164 (+ and 2 to 15 digits)", ErrInvalidNumber)
	}
	n, err := phonenumbers.Parse(number, "")
	if err != nil {
		return Number{}, fmt.Errorf("%w: unparsable", ErrInvalidNumber)
	}
	if !phonenumbers.IsValidNumber(n) {
		return Number{}, fmt.Errorf("%w: in no assigned range", ErrInvalidNumber)
	}
	region := phonenumbers.GetRegionCodeForNumber(n)
	if !KnownRegion(region) {
		return Number{}, ErrNoRegion
	}
	return Number{Region: region, Kind: refKinds[phonenumbers.GetNumberType(n)]}, nil
}

// refRaw is the library's answer before Lookup's region filter: region
// ("001" for a non-geographic entity), type, whether Parse succeeds and
// whether the number is valid.
func refRaw(number string) (region string, kind Kind, parsed, valid bool) {
	n, err := phonenumbers.Parse(number, "")
	if err != nil {
		return "", Unknown, false, false
	}
	if !phonenumbers.IsValidNumber(n) {
		return "", Unknown, true, false
	}
	return phonenumbers.GetRegionCodeForNumber(n), refKinds[phonenumbers.GetNumberType(n)], true, true
}

// agree reports how ours and the library's answers for number differ ("" if
// they do not).
func agree(number string) string {
	got, gotErr := Lookup(number)
	want, wantErr := refLookup(number)
	if got != want || errors.Is(gotErr, ErrInvalidNumber) != errors.Is(wantErr, ErrInvalidNumber) ||
		errors.Is(gotErr, ErrNoRegion) != errors.Is(wantErr, ErrNoRegion) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		return fmt.Sprintf("Lookup(%q) = %+v, %v; the library's %+v, %v", number, got, gotErr, want, wantErr)
	}
	if !refE164.MatchString(number) {
		return ""
	}
	r, k, p, v := lookup(number)
	wr, wk, wp, wv := refRaw(number)
	if r != wr || k != wk || p != wp || v != wv {
		return fmt.Sprintf("lookup(%q) = %q %s parsed %v valid %v; the library's %q %s %v %v", number, r, k, p, v, wr, wk, wp, wv)
	}
	return ""
}

var allTypes = []phonenumbers.PhoneNumberType{
	phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE, phonenumbers.PREMIUM_RATE,
	phonenumbers.SHARED_COST, phonenumbers.VOIP, phonenumbers.PERSONAL_NUMBER, phonenumbers.PAGER,
	phonenumbers.UAN, phonenumbers.VOICEMAIL,
}

// examples returns the library's example numbers in E.164: every region's
// for every type (GetExampleNumberForType), each non-geographic entity's
// (GetExampleNumberForNonGeoEntity), and the example of every description
// of every metadata entry, non-geographic ones included, after its calling
// code.
func examples(t testing.TB) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	regions := slices.Sorted(func(yield func(string) bool) {
		for r := range phonenumbers.GetSupportedRegions() {
			if !yield(r) {
				return
			}
		}
	})
	for _, r := range regions {
		for _, typ := range allTypes {
			if n := phonenumbers.GetExampleNumberForType(r, typ); n != nil {
				add(phonenumbers.Format(n, phonenumbers.E164))
			}
		}
	}
	for _, cc := range sortedKeys(phonenumbers.GetSupportedGlobalNetworkCallingCodes()) {
		if n := phonenumbers.GetExampleNumberForNonGeoEntity(cc); n != nil {
			add(phonenumbers.Format(n, phonenumbers.E164))
		}
	}
	coll, err := phonenumbers.MetadataCollection()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range coll.GetMetadata() {
		for _, d := range []*phonenumbers.PhoneNumberDesc{m.GetGeneralDesc(), m.GetFixedLine(), m.GetMobile(),
			m.GetTollFree(), m.GetPremiumRate(), m.GetSharedCost(), m.GetVoip(), m.GetPersonalNumber(),
			m.GetPager(), m.GetUan(), m.GetVoicemail(), m.GetNoInternationalDialling()} {
			if ex := d.GetExampleNumber(); ex != "" {
				add("+" + strconv.Itoa(int(m.GetCountryCode())) + ex)
			}
		}
	}
	return out
}

func sortedKeys(m map[int]bool) []int {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestExamplesMatchLibrary: every example number of the library's metadata
// gets the same answer from the generated lookup as from the library.
func TestExamplesMatchLibrary(t *testing.T) {
	exs := examples(t)
	kinds := map[Kind]int{}
	regions := map[string]bool{}
	for _, ex := range exs {
		if diff := agree(ex); diff != "" {
			t.Error(diff)
			continue
		}
		if r, k, _, ok := lookup(ex); ok {
			kinds[k]++
			regions[r] = true
		}
	}
	t.Logf("%d example numbers; valid ones in %d regions, by kind %v", len(exs), len(regions), kinds)
	// Not vacuous: the examples are valid numbers of every kind and region.
	if len(exs) < 1000 || len(regions) < 240 || len(kinds) < 11 {
		t.Errorf("too few examples: %d numbers, %d regions, %d kinds", len(exs), len(regions), len(kinds))
	}
}

// sample returns n deterministic numbers: a calling code of the map and
// random digits of every length, and mutations of the example numbers (the
// last digits changed, a digit added or removed, a 0 or a 1 after the
// calling code, the national part cut short).
func sample(t testing.TB, n int) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	codes := sortedKeys(phonenumbers.GetSupportedCallingCodes())
	exs := examples(t)
	digits := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		return string(b)
	}
	var out []string
	for len(out) < n {
		switch rng.IntN(3) {
		case 0:
			cc := strconv.Itoa(codes[rng.IntN(len(codes))])
			if k := 2 + rng.IntN(13); len(cc)+k <= 15 {
				out = append(out, "+"+cc+digits(k))
			}
		default:
			ex := exs[rng.IntN(len(exs))]
			cc := ex[:1+len(ccOf(ex))]
			switch rng.IntN(7) {
			case 0: // the last 1 to 6 digits changed
				k := min(1+rng.IntN(6), len(ex)-len(cc))
				out = append(out, ex[:len(ex)-k]+digits(k))
			case 1: // a digit added
				i := len(cc) + rng.IntN(len(ex)-len(cc)+1)
				out = append(out, ex[:i]+digits(1)+ex[i:])
			case 2: // a digit removed
				i := len(cc) + rng.IntN(len(ex)-len(cc))
				out = append(out, ex[:i]+ex[i+1:])
			case 3: // a 0 (a national prefix, most often) after the calling code
				out = append(out, cc+"0"+ex[len(cc):])
			case 4: // a 1, or the digits of a national prefix for parsing
				out = append(out, cc+[]string{"1", "8", "9", "15", "90", "0549"}[rng.IntN(6)]+ex[len(cc):])
			case 5: // the national part cut short
				out = append(out, ex[:len(cc)+rng.IntN(len(ex)-len(cc))])
			case 6: // the example with another region's calling code
				out = append(out, "+"+strconv.Itoa(codes[rng.IntN(len(codes))])+ex[len(cc):])
			}
		}
	}
	return out
}

// ccOf returns the calling code of an E.164 example number.
func ccOf(e164 string) string {
	for i := 1; i <= 3 && i < len(e164); i++ {
		if cc, _ := strconv.Atoi(e164[1 : 1+i]); phonenumbers.GetRegionCodesForCountryCode(cc) != nil {
			return e164[1 : 1+i]
		}
	}
	return ""
}

// TestSampleMatchesLibrary: 200,000 random and mutated numbers get the same
// answer from the generated lookup as from the library.
func TestSampleMatchesLibrary(t *testing.T) {
	n := 200_000
	if testing.Short() || raceEnabled {
		n = 20_000 // the library takes about 20 µs a number, 5 to 10 times that under -race
	}
	valid, unparsable, failures := 0, 0, 0
	kinds := map[Kind]int{}
	for _, number := range sample(t, n) {
		if diff := agree(number); diff != "" {
			if failures++; failures <= 20 {
				t.Error(diff)
			}
			continue
		}
		_, k, parsed, ok := lookup(number)
		if ok {
			valid++
			kinds[k]++
		}
		if !parsed {
			unparsable++
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d numbers differ", failures, n)
	}
	t.Logf("%d numbers, %d valid, %d unparsable; valid by kind %v", n, valid, unparsable, kinds)
	if valid < n/10 {
		t.Errorf("only %d of %d sampled numbers are valid: the sample tests little", valid, n)
	}
}

// FuzzLookupMatchesLibrary: any text, and the "+" and digits made of it,
// gets the same answer from the generated lookup as from the library.
func FuzzLookupMatchesLibrary(f *testing.F) {
	for _, s := range []string{
		"+447400123456", "+441481256789", "+12015550123", "+17875550123", "+4918012345", "+5511961234567",
		"+80012345678", "+999123456789", "+1900", "+440123456789", "+390612345678", "+5491187654321",
		"+2250701234567", "+61891621234", "+3780549123456", "+81000212345", "", "+", "+0", "+12", "abc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if diff := agree(s); diff != "" {
			t.Error(diff)
		}
		var b strings.Builder
		b.WriteByte('+')
		for i := 0; i < len(s) && b.Len() < 16; i++ {
			if s[i] >= '0' && s[i] <= '9' {
				b.WriteByte(s[i])
			}
		}
		if diff := agree(b.String()); diff != "" {
			t.Error(diff)
		}
	})
}

// TestGeneratedIsCurrent: metadata_gen.go and codes/known.go are what the
// generator writes from the library in go.mod (go generate ./internal/smsregion
// after an upgrade).
func TestGeneratedIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "codes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "run", "./internal/gen", "-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/gen: %v\n%s", err, out)
	}
	for _, f := range []string{"metadata_gen.go", filepath.Join("codes", "known.go")} {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator writes: run go generate ./internal/smsregion", f)
		}
	}
}
