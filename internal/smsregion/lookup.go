package smsregion

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// This file is the library's parse-and-validate path (nyaruka/phonenumbers
// v1.8.1, phonenumberutil.go) for the one input Lookup gives it, "+" and
// digits with no default region, over the generated copy of its metadata
// (metadata_gen.go). Each function names the library function it mirrors;
// the equivalence tests (equivalence_test.go) compare the two.

// The library's constants.
const (
	minLengthForNSN      = 2  // MIN_LENGTH_FOR_NSN
	maxLengthForNSN      = 17 // MAX_LENGTH_FOR_NSN
	maxLengthCountryCode = 3  // MAX_LENGTH_COUNTRY_CODE
	nonGeoRegion         = "001"
)

// The number types, in the order getNumberTypeHelper checks them.
const (
	tPremiumRate = iota
	tTollFree
	tSharedCost
	tVoIP
	tPersonal
	tPager
	tUAN
	tVoicemail
	tFixedLine
	tMobile
	nTypes
)

// typeKinds are the Kinds of the types above.
var typeKinds = [nTypes]Kind{PremiumRate, TollFree, SharedCost, VoIP, Personal, Pager, UAN, Voicemail, FixedLine, Mobile}

// desc is a PhoneNumberDesc: a national number pattern and the possible
// lengths, all and local-only.
type desc struct {
	pattern   string
	lengths   []int8
	localOnly []int8
}

// regionMeta is the part of a PhoneMetadata the lookup reads. A nil entry in
// types is a type the region has no numbers of (possible lengths [-1]).
type regionMeta struct {
	id              string // ISO 3166-1 alpha-2, or "001" for a non-geographic entity
	cc              int
	leadingDigits   string
	npParsing       string // national prefix for parsing
	npTransform     string // national prefix transform rule
	sameMobileFixed bool
	general         desc
	types           [nTypes]*desc
}

// callingCode is one entry of the library's country-code-to-region map.
type callingCode struct {
	code    int
	regions []*regionMeta // the main region first
}

// regexes caches compiled patterns by their text, as the library's
// regexFor does: compiled on first use, never at package initialization.
var regexes sync.Map // string -> *regexp.Regexp

func regexFor(pattern string) *regexp.Regexp {
	if re, ok := regexes.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re, _ := regexes.LoadOrStore(pattern, regexp.MustCompile(pattern))
	return re.(*regexp.Regexp)
}

func regionsFor(cc int) []*regionMeta {
	i, found := slices.BinarySearchFunc(callingCodes, cc, func(c callingCode, cc int) int { return c.code - cc })
	if !found {
		return nil
	}
	return callingCodes[i].regions
}

// parsed is what the library's Parse leaves in a PhoneNumber for Lookup.
type parsed struct {
	cc  int
	nsn string // GetNationalSignificantNumber
}

// parse mirrors parseHelper(number, "", false, true, ...) for number = "+"
// and 1 to 15 digits. It reports false where the library returns an error.
func parse(number string) (parsed, bool) {
	digits := number[1:] // maybeStripInternationalPrefixAndNormalize: the leading "+"
	// maybeExtractCountryCode: ErrTooShortAfterIDD.
	if len(digits) <= minLengthForNSN {
		return parsed{}, false
	}
	// extractCountryCode. When it finds none the library retries without
	// the plus, where with no default region nothing is found either:
	// ErrInvalidCountryCode.
	cc, national := extractCountryCode(digits)
	if cc == 0 {
		return parsed{}, false
	}
	// The main region's metadata, or the non-geographic entity's
	// (getMetadataForRegionOrCallingCode(cc, GetRegionCodeForCountryCode(cc))).
	meta := regionsFor(cc)[0]
	if len(national) < minLengthForNSN {
		return parsed{}, false // ErrTooShortNSN
	}
	// Keep the stripped number only if its length is possible for the region.
	potential, _ := maybeStripNationalPrefix(national, meta)
	switch testNumberLength(potential, meta) {
	case tooShort, isPossibleLocalOnly, invalidLength:
	default:
		national = potential
	}
	if len(national) < minLengthForNSN {
		return parsed{}, false // ErrTooShortNSN
	}
	if len(national) > maxLengthForNSN {
		return parsed{}, false // ErrNumTooLong
	}
	return parsed{cc: cc, nsn: nationalSignificantNumber(national)}, true
}

// extractCountryCode mirrors extractCountryCode: the first 1, 2 or 3
// digits that are a calling code of the map.
func extractCountryCode(full string) (int, string) {
	if len(full) == 0 || full[0] == '0' {
		return 0, ""
	}
	for i := 1; i <= maxLengthCountryCode && i <= len(full); i++ {
		potential, _ := strconv.Atoi(full[:i])
		if regionsFor(potential) != nil {
			return potential, full[i:]
		}
	}
	return 0, ""
}

// nationalSignificantNumber mirrors setItalianLeadingZerosForPhoneNumber,
// the uint64 the library keeps the national number in, and
// GetNationalSignificantNumber.
func nationalSignificantNumber(national string) string {
	zeros := 0 // NumberOfLeadingZeros, used only with ItalianLeadingZero
	if len(national) >= 2 && national[0] == '0' {
		zeros = 1
		for zeros < len(national)-1 && national[zeros] == '0' {
			zeros++
		}
	}
	val, _ := strconv.ParseUint(national, 10, 64)
	return strings.Repeat("0", min(zeros, maxLengthForNSN)) + strconv.FormatUint(val, 10)
}

// maybeStripNationalPrefix mirrors maybeStripNationalPrefixAndCarrierCode
// (the carrier code is not kept). It returns the number, changed or not,
// and whether it changed.
func maybeStripNationalPrefix(number string, meta *regionMeta) (string, bool) {
	if len(number) == 0 || len(meta.npParsing) == 0 {
		return number, false
	}
	prefixMatcher := regexFor("^(?:" + meta.npParsing + ")")
	if !prefixMatcher.MatchString(number) {
		return number, false
	}
	nationalNumberRule := regexFor("^(?:" + meta.general.pattern + ")$")
	isViableOriginalNumber := nationalNumberRule.MatchString(number)
	groups := prefixMatcher.FindStringSubmatchIndex(number)
	numOfGroups := len(groups)/2 - 1
	// The library's test: no transform rule, or the last capturing group
	// (group 0, the whole match, when there is none) did not match.
	if len(meta.npTransform) == 0 || groups[numOfGroups*2] < 0 {
		if isViableOriginalNumber && !nationalNumberRule.MatchString(number[groups[1]:]) {
			return number, false
		}
		return number[groups[1]:], true
	}
	transformed := prefixMatcher.ReplaceAllString(number, meta.npTransform)
	if isViableOriginalNumber && !nationalNumberRule.MatchString(transformed) {
		return number, false
	}
	return transformed, true
}

// The ValidationResults testNumberLength returns.
const (
	isPossible = iota
	isPossibleLocalOnly
	tooShort
	invalidLength
	tooLong
)

// testNumberLength mirrors testNumberLength(number, metadata, UNKNOWN): the
// general description's lengths.
func testNumberLength(number string, meta *regionMeta) int {
	possible := meta.general.lengths
	local := meta.general.localOnly
	if possible[0] == -1 {
		return invalidLength
	}
	actual := len(number)
	for _, l := range local {
		if int(l) == actual {
			return isPossibleLocalOnly
		}
	}
	switch minimum := int(possible[0]); {
	case minimum == actual:
		return isPossible
	case minimum > actual:
		return tooShort
	case int(possible[len(possible)-1]) < actual:
		return tooLong
	}
	for _, l := range possible[1:] {
		if int(l) == actual {
			return isPossible
		}
	}
	return invalidLength
}

// matches mirrors isNumberMatchingDesc and isNumberPossibleForDesc. A nil
// desc (possible lengths [-1]) matches no number.
func matches(nsn string, d *desc) bool {
	if d == nil {
		return false
	}
	if len(d.lengths) > 0 && !slices.Contains(d.lengths, int8(len(nsn))) {
		return false
	}
	return regexFor("^(?:" + d.pattern + ")$").MatchString(nsn)
}

// numberType mirrors getNumberTypeHelper; ok is false for UNKNOWN.
func numberType(nsn string, meta *regionMeta) (kind Kind, ok bool) {
	if !matches(nsn, &meta.general) {
		return Unknown, false
	}
	for t := tPremiumRate; t <= tVoicemail; t++ {
		if matches(nsn, meta.types[t]) {
			return typeKinds[t], true
		}
	}
	if matches(nsn, meta.types[tFixedLine]) {
		if meta.sameMobileFixed || matches(nsn, meta.types[tMobile]) {
			return FixedLineOrMobile, true
		}
		return FixedLine, true
	}
	if !meta.sameMobileFixed && matches(nsn, meta.types[tMobile]) {
		return Mobile, true
	}
	return Unknown, false
}

// regionFor mirrors GetRegionCodeForNumber and
// getRegionCodeForNumberFromRegionList: the region's metadata, or nil for
// the library's "" (a shared code none of whose regions claims the number).
func regionFor(p parsed) *regionMeta {
	regions := regionsFor(p.cc)
	if len(regions) == 1 {
		return regions[0]
	}
	for _, meta := range regions {
		if len(meta.leadingDigits) > 0 {
			if regexFor("^(?:" + meta.leadingDigits + ")").MatchString(p.nsn) {
				return meta
			}
		} else if _, ok := numberType(p.nsn, meta); ok {
			return meta
		}
	}
	return nil
}

// lookup mirrors Parse(number, ""), IsValidNumber, GetRegionCodeForNumber
// and GetNumberType for number = "+" and digits. parsed is false where Parse
// fails, valid where IsValidNumber does; region is "001" for a
// non-geographic entity.
func lookup(number string) (region string, kind Kind, parsed, valid bool) {
	p, ok := parse(number)
	if !ok {
		return "", Unknown, false, false
	}
	// IsValidNumberForRegion(number, GetRegionCodeForNumber(number)). Every
	// region listed for a code has that code in its metadata (the
	// generator checks), so the library's calling-code test holds.
	meta := regionFor(p)
	if meta == nil {
		return "", Unknown, true, false
	}
	kind, ok = numberType(p.nsn, meta)
	if !ok {
		return "", Unknown, true, false
	}
	return meta.id, kind, true, true
}
