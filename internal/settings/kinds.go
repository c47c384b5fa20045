package settings

import (
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// A Kind is how a setting's value is written as text: in an environment
// variable, in CDK context and in a default. Parse refuses text the
// functions would refuse, with an error that says what it wants and never
// quotes the text; Format writes a value so that Parse reads it back, and
// writes "" only for a value that means "unset" (no rate, an empty optional
// text), which the stack then leaves out of the environment. False and zero
// are values: they are written ("false", "0s"), or the function would read
// its default instead.
type Kind[T any] struct {
	Parse  func(text string) (T, error)
	Format func(T) string
	// check, if set, refuses a value a program set directly (not parsed),
	// with the same words as Parse.
	check func(T) error
}

// The kinds of the settings. The stack reuses them for its own parameters.
var (
	// Text is any string.
	Text = Kind[string]{
		Parse:  func(s string) (string, error) { return s, nil },
		Format: func(s string) string { return s },
	}
	// Duration is a non-negative Go duration, written without zero units (2m, 30s, 9600h).
	Duration = durationKind(0, "want a non-negative Go duration such as 30s or 2m")
	// PositiveDuration is a Go duration above zero.
	PositiveDuration = durationKind(1, "want a positive Go duration such as 30s or 2m")
	// Count is a positive integer.
	Count = Kind[int]{
		Parse: func(s string) (int, error) {
			n, err := strconv.Atoi(s)
			if err != nil {
				return 0, errPositiveInt
			}
			return n, positiveInt(n)
		},
		Format: strconv.Itoa,
		check:  positiveInt,
	}
	// Flag is true or false, each written out: a false flag whose default is
	// true must reach the functions as false.
	Flag = Kind[bool]{
		Parse: func(s string) (bool, error) {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return false, errors.New("want true or false")
			}
			return b, nil
		},
		Format: strconv.FormatBool,
	}
	// Rate is a number of sends per second above zero; 0, written as "", is no configured rate.
	Rate = Kind[float64]{
		Parse: func(s string) (float64, error) {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f == 0 {
				return 0, errRate
			}
			return f, rate(f)
		},
		Format: func(f float64) string {
			if f == 0 {
				return ""
			}
			return strconv.FormatFloat(f, 'f', -1, 64)
		},
		check: rate,
	}
	// Price is an amount in US dollars above zero, written as a decimal with
	// up to five places below 1000 ("0.10", "0.00645"): the text End User
	// Messaging's MaxPrice takes.
	Price = Kind[string]{
		Parse:  func(s string) (string, error) { return s, price(s) },
		Format: func(s string) string { return s },
		check: func(s string) error {
			if s == "" {
				return nil
			}
			return price(s)
		},
	}
	// Level is a log level: debug, info, warn or error.
	Level = Kind[slog.Level]{
		Parse: func(s string) (slog.Level, error) {
			var l slog.Level
			if err := l.UnmarshalText([]byte(s)); err != nil {
				return 0, errors.New("want debug, info, warn or error")
			}
			return l, nil
		},
		Format: func(l slog.Level) string { return strings.ToLower(l.String()) },
	}
)

var (
	errPositiveInt = errors.New("want a positive integer")
	errRate        = errors.New("want a positive number of sends per second")
)

var priceText = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,5})?$`)

// price accepts a decimal amount of US dollars above zero and below 1000.
func price(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err != nil || !priceText.MatchString(s) || f <= 0 {
		return errors.New("want a price in US dollars above zero, such as 0.10 (up to five decimal places)")
	}
	return nil
}

func positiveInt(n int) error {
	if n < 1 {
		return errPositiveInt
	}
	return nil
}

// rate accepts 0 (no configured rate) and positive rates up to a million
// sends per second; NaN and infinities fail both comparisons.
func rate(f float64) error {
	if f != 0 && !(f > 0 && f <= 1e6) {
		return errRate
	}
	return nil
}

func durationKind(least time.Duration, want string) Kind[time.Duration] {
	check := func(d time.Duration) error {
		if d < least {
			return errors.New(want)
		}
		return nil
	}
	return Kind[time.Duration]{
		Parse: func(s string) (time.Duration, error) {
			d, err := time.ParseDuration(s)
			if err != nil {
				return 0, errors.New(want)
			}
			return d, check(d)
		},
		Format: FormatDuration,
		check:  check,
	}
}

// FormatDuration writes d as time.ParseDuration reads it, without zero
// units: 2m, 30s, 9600h, 1h30m.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// field binds a declaration to the part of Settings it fills.
type field struct {
	set   func(s *Settings, text string) error
	text  func(s *Settings) string
	check func(s *Settings) error
}

// at binds a field of Settings, reached through ptr.
func at[T any](k Kind[T], ptr func(*Settings) *T) field {
	return field{
		set: func(s *Settings, text string) error {
			v, err := k.Parse(text)
			if err == nil {
				*ptr(s) = v
			}
			return err
		},
		text:  func(s *Settings) string { return k.Format(*ptr(s)) },
		check: func(s *Settings) error { return checked(k, *ptr(s)) },
	}
}

// per binds the entry of one channel in a per-channel map of Settings.
func per[T any](k Kind[T], m func(*Settings) map[ledger.Channel]T, ch ledger.Channel) field {
	return field{
		set: func(s *Settings, text string) error {
			v, err := k.Parse(text)
			if err == nil {
				m(s)[ch] = v
			}
			return err
		},
		text:  func(s *Settings) string { return k.Format(m(s)[ch]) },
		check: func(s *Settings) error { return checked(k, m(s)[ch]) },
	}
}

func checked[T any](k Kind[T], v T) error {
	if k.check == nil {
		return nil
	}
	return k.check(v)
}
