package charclass_test

import (
	"fmt"
	"testing"

	"github.com/resetledger/resetledger/pkg/charclass"
)

func TestAlnumPlus(t *testing.T) {
	c := charclass.AlnumPlus("._:-")
	if got := c.String(); got != "[A-Za-z0-9._:-]" {
		t.Fatalf("String() = %q", got)
	}
	for _, r := range "azAZ09._:-" {
		if !c.Has(r) {
			t.Errorf("Has(%q) = false", r)
		}
	}
	for _, r := range "@+ /\x00\x7f\n`[{é" {
		if c.Has(r) {
			t.Errorf("Has(%q) = true", r)
		}
	}
	if c.Has(-1) || c.Has('a'+128) {
		t.Error("Has outside ASCII = true")
	}
}

func TestOf(t *testing.T) {
	hex := charclass.Of("0123456789abcdef")
	if hex.String() != "[0123456789abcdef]" {
		t.Fatalf("String() = %q", hex.String())
	}
	if !hex.All("0af9") || hex.All("0aF9") || hex.All("g") {
		t.Fatal("lower-case hex class is wrong")
	}
	var empty charclass.Class
	if empty.Has('a') || !empty.All("") || empty.All("a") {
		t.Fatal("the zero Class is not empty")
	}
}

func TestFits(t *testing.T) {
	c := charclass.AlnumPlus("_-")
	tests := []struct {
		s    string
		max  int
		want bool
	}{
		{"", 5, false},
		{"a", 5, true},
		{"abcde", 5, true},
		{"abcdef", 5, false},
		{"a_b-c", 5, true},
		{"a.b", 5, false},
		{"é", 5, false},     // two bytes outside ASCII
		{"a\x00", 5, false}, // control character
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.s, tt.max), func(t *testing.T) {
			if got := c.Fits(tt.s, tt.max); got != tt.want {
				t.Fatalf("Fits(%q, %d) = %v, want %v", tt.s, tt.max, got, tt.want)
			}
		})
	}
}

func ExampleClass_Fits() {
	tag := charclass.AlnumPlus("_-")
	fmt.Println(tag.Fits("content_hash", 256), tag.Fits("player@example.org", 256))
	fmt.Println("a tag is 1-256 of", tag)
	// Output:
	// true false
	// a tag is 1-256 of [A-Za-z0-9_-]
}
