package fingerprint

import "strings"

// Mailbox rules: which spellings of an email address reach one mailbox, by
// what the large providers document, so that the destination limit counts
// one mailbox once, however the address is written. A rule may only merge
// spellings the provider delivers to one mailbox (or reserves for its
// owner): merging two people's mailboxes would let one of them spend the
// other's limit; leaving one mailbox split would let a bomber multiply the
// limit by the spellings.
type mailboxRule struct {
	// domains are the provider's domains for one namespace of mailboxes;
	// addresses at any of them are counted under the first.
	domains []string
	// tags are the characters that start a sub-address in the local part
	// (name+tag): the local part is cut at the first of them.
	tags string
	// dropDots removes every dot from the local part: the provider ignores
	// them.
	dropDots bool
}

// mailboxRules is the table, one row per provider namespace (docs/design.md,
// "Send limits", says where each provider documents its rule).
var mailboxRules = []mailboxRule{
	// Gmail: dots do not matter, +tag is delivered to the mailbox, and
	// googlemail.com is the same mailbox as gmail.com.
	{domains: []string{"gmail.com", "googlemail.com"}, tags: "+", dropDots: true},
	// Outlook.com (Microsoft consumer mail): plus addressing. Each domain
	// is its own namespace (name@hotmail.com is not name@outlook.com), and
	// dots count.
	{domains: []string{"outlook.com"}, tags: "+"},
	{domains: []string{"hotmail.com"}, tags: "+"},
	{domains: []string{"live.com"}, tags: "+"},
	{domains: []string{"msn.com"}, tags: "+"},
	{domains: []string{"hotmail.co.uk"}, tags: "+"},
	{domains: []string{"hotmail.fr"}, tags: "+"},
	{domains: []string{"outlook.fr"}, tags: "+"},
	{domains: []string{"outlook.de"}, tags: "+"},
	// Yahoo: disposable addresses are <base name>-<keyword>; a Yahoo ID
	// cannot contain '-', so the cut merges only one owner's disposable
	// addresses (under the base name, not the account's primary address:
	// that link is Yahoo's secret). '+' is cut too: no Yahoo ID holds one.
	{domains: []string{"yahoo.com"}, tags: "+-"},
	{domains: []string{"ymail.com"}, tags: "+-"},
	{domains: []string{"rocketmail.com"}, tags: "+-"},
	{domains: []string{"yahoo.co.uk"}, tags: "+-"},
	{domains: []string{"yahoo.fr"}, tags: "+-"},
	{domains: []string{"yahoo.de"}, tags: "+-"},
	// iCloud Mail: plus addressing; me.com and mac.com names are the
	// icloud.com name of the same Apple account (one namespace).
	{domains: []string{"icloud.com", "me.com", "mac.com"}, tags: "+"},
	// Fastmail: plus addressing. (Its subdomain addressing,
	// anything@name.fastmail.com, is not merged.)
	{domains: []string{"fastmail.com"}, tags: "+"},
	{domains: []string{"fastmail.fm"}, tags: "+"},
	// Proton: +aliases; one account's free personal addresses share the
	// name across proton.me, protonmail.com, protonmail.ch and pm.me.
	{domains: []string{"proton.me", "protonmail.com", "protonmail.ch", "pm.me"}, tags: "+"},
}

// otherMailbox is the rule of every other domain: only lowercased. Whether
// a domain delivers "name+tag" to "name" is its own choice (RFC 5321 leaves
// the local part to it; a '+' may be part of a distinct mailbox), so
// merging them could let one person spend another's limit.
var otherMailbox = mailboxRule{}

var mailboxByDomain = func() map[string]mailboxRule {
	m := map[string]mailboxRule{}
	for _, r := range mailboxRules {
		for _, d := range r.domains {
			if _, dup := m[d]; dup {
				panic("fingerprint: domain " + d + " in two mailbox rules")
			}
			m[d] = r
		}
	}
	return m
}()

// normalizeEmail returns the spelling of an address's mailbox: lowercased,
// the domain canonical under its rule, the sub-address tag cut and, where
// the provider ignores them, the dots removed. An address it cannot read
// as local@domain (no '@', a quoted local part) is only lowercased, as is
// one whose local part the rule would leave empty.
func normalizeEmail(address string) string {
	a := strings.ToLower(address)
	at := strings.LastIndexByte(a, '@')
	if at <= 0 || strings.HasPrefix(a, `"`) {
		return a
	}
	local, domain := a[:at], strings.TrimSuffix(a[at+1:], ".")
	r, ok := mailboxByDomain[domain]
	if ok {
		domain = r.domains[0]
	} else {
		r = otherMailbox
	}
	if i := strings.IndexAny(local, r.tags); i >= 0 {
		local = local[:i]
	}
	if r.dropDots {
		local = strings.ReplaceAll(local, ".", "")
	}
	if local == "" {
		return a
	}
	return local + "@" + domain
}
