package fingerprint_test

import (
	"context"
	"testing"

	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestNormalizeMailbox: the spellings a provider delivers to one mailbox
// normalize alike; spellings that are different mailboxes do not.
func TestNormalizeMailbox(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Gmail: dots, +tags, googlemail.com, case.
		{"a.b+x@gmail.com", "ab@gmail.com"},
		{"ab@gmail.com", "ab@gmail.com"},
		{"AB@googlemail.com", "ab@gmail.com"},
		{" A.B.+reset.1@GMail.com ", "ab@gmail.com"},
		// Outlook.com and friends: +tags; dots count; each domain its own.
		{"first.last+games@outlook.com", "first.last@outlook.com"},
		{"first.last+x@hotmail.com", "first.last@hotmail.com"},
		{"firstlast@live.com", "firstlast@live.com"},
		// Yahoo: disposable base-keyword addresses, and '+'.
		{"base-shop@yahoo.com", "base@yahoo.com"},
		{"base+x@ymail.com", "base@ymail.com"},
		{"first.last@yahoo.com", "first.last@yahoo.com"},
		// iCloud: +tags, me.com and mac.com are icloud.com.
		{"name+x@me.com", "name@icloud.com"},
		{"Name@MAC.com", "name@icloud.com"},
		{"na.me@icloud.com", "na.me@icloud.com"},
		// Fastmail, Proton.
		{"name+list@fastmail.com", "name@fastmail.com"},
		{"alice.user+x@pm.me", "alice.user@proton.me"},
		{"alice.user@protonmail.com", "alice.user@proton.me"},
		// Other domains: only lowercased; a trailing dot on the domain.
		{"First.Last+x@Example.com", "first.last+x@example.com"},
		{"first-last@example.com.", "first-last@example.com"},
		// What cannot be read as a mailbox is only lowercased.
		{"+x@gmail.com", "+x@gmail.com"},
		{"...@gmail.com", "...@gmail.com"},
		{`"a+b"@example.com`, `"a+b"@example.com`},
		{"NoAt", "noat"},
	} {
		if got, _ := fingerprint.Normalize(ledger.Email, tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Different mailboxes stay apart.
	for _, pair := range [][2]string{
		{"ab@gmail.com", "ab@outlook.com"},
		{"a.b@outlook.com", "ab@outlook.com"},
		{"name@hotmail.com", "name@outlook.com"},
		{"a.b@example.com", "ab@example.com"},
		{"a-b@example.com", "a@example.com"},
		{"a+x@example.com", "a@example.com"},
	} {
		a, _ := fingerprint.Normalize(ledger.Email, pair[0])
		b, _ := fingerprint.Normalize(ledger.Email, pair[1])
		if a == b {
			t.Errorf("%s and %s normalize alike", pair[0], pair[1])
		}
	}
}

// TestNormalizeNamesEachChannel: a channel without an address rule is an
// error, and its fingerprint too, never an email address by default.
func TestNormalizeNamesEachChannel(t *testing.T) {
	if _, err := fingerprint.Normalize(ledger.Channel("push"), "device-token-1"); err == nil {
		t.Fatal("a channel with no rule was normalized")
	}
	if _, err := (&fingerprint.Local{Key: []byte("k")}).Fingerprint(context.Background(), ledger.Channel("push"), "x"); err == nil {
		t.Fatal("a channel with no rule was fingerprinted")
	}
	for _, ch := range ledger.Channels {
		if _, err := fingerprint.Normalize(ch, "a"); err != nil {
			t.Errorf("channel %s has no rule: %v", ch, err)
		}
	}
}
