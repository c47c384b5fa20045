// Package charclass checks strings against small ASCII character classes:
// the opaque identifiers, tag values, key ids and provider codes that the
// ledger and its transports accept, store or print.
//
// A narrow class is a privacy and log-safety check as much as a format
// check: a class without '@' keeps an email address out, one without '+'
// keeps a phone number out, and none of them holds a control character.
// Every validator builds its class here, so they all read the same way and
// an error message can name the class it enforced (Class.String).
package charclass

// Class is a set of ASCII characters. The zero value is empty.
type Class struct {
	bits [2]uint64 // bit c set: ASCII character c is in the class
	desc string
}

// AlnumPlus returns the class of the ASCII letters, the digits and the
// characters of extra, which must be ASCII. Its String is
// "[A-Za-z0-9" + extra + "]".
func AlnumPlus(extra string) Class {
	c := Of("")
	for _, r := range [][2]byte{{'a', 'z'}, {'A', 'Z'}, {'0', '9'}} {
		for b := r[0]; b <= r[1]; b++ {
			c.add(b)
		}
	}
	for i := 0; i < len(extra); i++ {
		c.add(extra[i])
	}
	c.desc = "[A-Za-z0-9" + extra + "]"
	return c
}

// Of returns the class of exactly the characters of chars, which must be
// ASCII. Its String is "[" + chars + "]".
func Of(chars string) Class {
	c := Class{desc: "[" + chars + "]"}
	for i := 0; i < len(chars); i++ {
		c.add(chars[i])
	}
	return c
}

func (c *Class) add(b byte) {
	if b < 128 {
		c.bits[b/64] |= 1 << (b % 64)
	}
}

// Has reports whether r is in the class.
func (c Class) Has(r rune) bool {
	return r >= 0 && r < 128 && c.bits[r/64]&(1<<(r%64)) != 0
}

// All reports whether every byte of s is in the class; it is true for "".
// A multi-byte UTF-8 character is never in a class.
func (c Class) All(s string) bool {
	for i := 0; i < len(s); i++ {
		if !c.Has(rune(s[i])) {
			return false
		}
	}
	return true
}

// Fits reports whether s is 1 to max bytes long and every byte is in the
// class.
func (c Class) Fits(s string, max int) bool {
	return len(s) > 0 && len(s) <= max && c.All(s)
}

// String describes the class as a bracket expression, e.g. "[A-Za-z0-9_-]".
func (c Class) String() string { return c.desc }
