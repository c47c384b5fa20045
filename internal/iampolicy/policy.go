// Package iampolicy evaluates AWS IAM policy documents for one request, the
// way AWS decides within one account: an explicit Deny in any policy wins;
// otherwise an Allow in the principal's identity policies or in the
// resource's policy allows, except for KMS keys, whose key policy must allow
// the principal itself or delegate to IAM through the account root.
//
// It exists because the local emulator enforces no IAM: the tests record the
// calls each function really makes (internal/awscall) and evaluate them with
// this package against the synthesized template's policies.
//
// A request is made either by an IAM role (Request.Principal) with its
// identity policies, or by an AWS service principal (Request.Service, such as
// sns.amazonaws.com delivering to a queue), which has no identity policies: a
// service is allowed only by a resource policy statement that names it (or
// "*"), and its request context carries aws:PrincipalIsAWSService=true and
// aws:PrincipalServiceName, but no aws:PrincipalArn or aws:PrincipalAccount.
// A role's request carries aws:PrincipalIsAWSService=false.
//
// It covers the policy language the stack uses: Allow and Deny; Action and
// NotAction, Resource and NotResource with * and ? wildcards (ARNs compared
// segment by segment); Principal "*", AWS account roots, role ARNs and
// service principals; and the condition operators String(Not)Equals,
// String(Not)EqualsIgnoreCase, String(Not)Like, Arn(Not)Equals, Arn(Not)Like
// and Bool, with or without IfExists, and Null. Anything else (a ForAnyValue
// qualifier, an unknown operator, a federated principal, NotPrincipal) is an
// error, never a silent allow or deny.
package iampolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnsupported reports policy language this evaluator does not implement.
var ErrUnsupported = errors.New("iampolicy: unsupported policy element")

// Effect is Allow or Deny.
type Effect string

// The two effects.
const (
	Allow Effect = "Allow"
	Deny  Effect = "Deny"
)

// Policy is one policy document.
type Policy struct {
	// Source names where the policy came from (a template resource), for messages.
	Source     string      `json:"-"`
	Statements []Statement `json:"Statement"`
}

// Statement is one policy statement. List-or-string elements are normalized
// to lists.
type Statement struct {
	Sid         string
	Effect      Effect
	Principal   *Principal // nil in identity policies
	Action      []string
	NotAction   []string
	Resource    []string
	NotResource []string
	Condition   map[string]map[string][]string // operator -> key -> values
}

// Principal is a statement's Principal: Any ("*") or lists of AWS and
// Service principals.
type Principal struct {
	Any     bool
	AWS     []string
	Service []string
}

// Request is one authorization request: a principal performing an action on
// a resource, with the condition keys the request context carries. Exactly
// one of Principal and Service names who makes it.
type Request struct {
	Principal string // role ARN
	Account   string // the principal's account id
	// Service is the service principal making the request (sns.amazonaws.com),
	// instead of a role; Principal and Account are then empty.
	Service  string
	Action   string            // service:Operation
	Resource string            // ARN, or "*" for actions without resource-level permissions
	Context  map[string]string // condition keys (case-insensitive names)
}

// The condition keys Evaluate sets from the request's principal; a caller's
// Context cannot supply or override them.
const (
	keyPrincipalArn     = "aws:PrincipalArn"
	keyPrincipalAccount = "aws:PrincipalAccount"
	keyIsAWSService     = "aws:PrincipalIsAWSService"
	keyServiceName      = "aws:PrincipalServiceName"
)

// Decision is the outcome of Evaluate.
type Decision struct {
	Allowed bool
	// Reason says which statement decided, or why nothing allowed.
	Reason string
}

// Evaluate decides req against the principal's identity policies and, when
// the resource has one, its resource policy. isKMSKey marks the resource
// policy as a KMS key policy (see the package documentation).
//
// Within one account an explicit Deny in either policy wins; otherwise an
// Allow in either allows, except that a KMS key policy must allow the
// principal itself, or delegate to IAM (allow the account root) while an
// identity policy allows. A service principal has no identity policies.
//
// The request context always carries the principal's keys from req: for a
// role aws:PrincipalArn, aws:PrincipalAccount and
// aws:PrincipalIsAWSService=false; for a service principal
// aws:PrincipalIsAWSService=true and aws:PrincipalServiceName (a caller can
// neither leave them out nor add aws:PrincipalArn to a service's request).
func Evaluate(req Request, identity []Policy, resource *Policy, isKMSKey bool) (Decision, error) {
	ctx, err := requestContext(req)
	if err != nil {
		return Decision{}, err
	}
	if req.Service != "" && len(identity) > 0 {
		return Decision{}, fmt.Errorf("iampolicy: service principal %s has no identity policies", req.Service)
	}
	req.Context = ctx
	var identityAllow, resourceAllowsPrincipal, resourceDelegates string
	for _, p := range identity {
		deny, allows, err := p.scan(req, false)
		if err != nil || deny != "" {
			return Decision{Reason: deny}, err
		}
		for _, st := range allows {
			identityAllow = st.where
		}
	}
	if resource != nil {
		deny, allows, err := resource.scan(req, true)
		if err != nil || deny != "" {
			return Decision{Reason: deny}, err
		}
		for _, st := range allows {
			if st.Principal.namesDirectly(req) {
				resourceAllowsPrincipal = st.where
			} else {
				resourceDelegates = st.where
			}
		}
	}
	switch {
	case resourceAllowsPrincipal != "":
		return Decision{Allowed: true, Reason: "allowed by " + resourceAllowsPrincipal}, nil
	case isKMSKey && identityAllow != "" && resourceDelegates != "":
		return Decision{Allowed: true, Reason: "allowed by " + identityAllow + " (key policy delegates to IAM in " + resourceDelegates + ")"}, nil
	case isKMSKey && identityAllow != "":
		return Decision{Reason: "the key policy neither allows the principal nor delegates to IAM (" + identityAllow + " alone is not enough for a KMS key)"}, nil
	case isKMSKey:
		return Decision{Reason: "no statement allows it (a KMS key needs its key policy to allow the principal, or to delegate to IAM and an identity policy to allow)"}, nil
	case identityAllow != "":
		return Decision{Allowed: true, Reason: "allowed by " + identityAllow}, nil
	}
	return Decision{Reason: "no statement allows it (implicit deny)"}, nil
}

// requestContext is req's context with the principal's keys set from req.
func requestContext(req Request) (map[string]string, error) {
	if req.Service != "" && (req.Principal != "" || req.Account != "") {
		return nil, fmt.Errorf("iampolicy: request names both service %s and principal %s", req.Service, req.Principal)
	}
	ctx := map[string]string{}
	for k, v := range req.Context {
		switch {
		case strings.EqualFold(k, keyPrincipalArn), strings.EqualFold(k, keyPrincipalAccount),
			strings.EqualFold(k, keyIsAWSService), strings.EqualFold(k, keyServiceName):
			continue // set from the principal below, never from the caller
		}
		ctx[k] = v
	}
	if req.Service != "" {
		ctx[keyIsAWSService], ctx[keyServiceName] = "true", req.Service
		return ctx, nil
	}
	ctx[keyPrincipalArn], ctx[keyPrincipalAccount], ctx[keyIsAWSService] = req.Principal, req.Account, "false"
	return ctx, nil
}

// matched is a statement that applies to a request, with where it is.
type matched struct {
	Statement
	where string
}

// scan returns the first Deny statement of p that applies to req (as
// "explicit deny in ..."), or else every applying Allow statement.
func (p Policy) scan(req Request, resourcePolicy bool) (deny string, allows []matched, err error) {
	for i, st := range p.Statements {
		ok, err := st.matches(req, resourcePolicy)
		if err != nil {
			return "", nil, fmt.Errorf("%s statement %d: %w", p.Source, i, err)
		}
		if !ok {
			continue
		}
		where := fmt.Sprintf("%s statement %s", p.Source, st.name(i))
		if st.Effect == Deny {
			return "explicit deny in " + where, nil, nil
		}
		allows = append(allows, matched{st, where})
	}
	return "", allows, nil
}

func (st Statement) name(i int) string {
	if st.Sid != "" {
		return st.Sid
	}
	return fmt.Sprintf("#%d", i)
}

// matches reports whether st applies to req: principal (for resource
// policies), action, resource and every condition.
func (st Statement) matches(req Request, resourcePolicy bool) (bool, error) {
	if resourcePolicy {
		if st.Principal == nil {
			return false, fmt.Errorf("%w: resource policy statement without Principal", ErrUnsupported)
		}
		if !st.Principal.includes(req) {
			return false, nil
		}
	}
	if len(st.Action) > 0 == (len(st.NotAction) > 0) {
		return false, fmt.Errorf("%w: want exactly one of Action and NotAction", ErrUnsupported)
	}
	if len(st.Action) > 0 && !anyMatch(st.Action, req.Action, true) {
		return false, nil
	}
	if len(st.NotAction) > 0 && anyMatch(st.NotAction, req.Action, true) {
		return false, nil
	}
	if len(st.Resource) > 0 == (len(st.NotResource) > 0) {
		return false, fmt.Errorf("%w: want exactly one of Resource and NotResource", ErrUnsupported)
	}
	if len(st.Resource) > 0 && !anyResource(st.Resource, req.Resource) {
		return false, nil
	}
	if len(st.NotResource) > 0 && anyResource(st.NotResource, req.Resource) {
		return false, nil
	}
	return conditionsHold(st.Condition, req.Context)
}

// includes reports whether the principal element covers req's principal:
// "*" (which AWS documents as every principal, service principals included),
// the role ARN itself, or the root of the principal's account; for a service
// principal, "*" or the service itself.
func (p *Principal) includes(req Request) bool {
	if req.Service != "" {
		return p.namesDirectly(req)
	}
	if p.Any {
		return true
	}
	for _, a := range p.AWS {
		if a == "*" || a == req.Principal || a == req.Account || a == "arn:aws:iam::"+req.Account+":root" {
			return true
		}
	}
	return false
}

// namesDirectly reports whether p grants to req's principal itself rather
// than to its account (which, within the account, delegates to IAM
// policies): "*", the role ARN, or the service principal.
func (p *Principal) namesDirectly(req Request) bool {
	if p.Any {
		return true
	}
	for _, a := range p.AWS {
		if a == "*" || (req.Service == "" && a == req.Principal) {
			return true
		}
	}
	for _, s := range p.Service {
		if req.Service != "" && s == req.Service {
			return true
		}
	}
	return false
}

func anyMatch(patterns []string, v string, foldCase bool) bool {
	for _, p := range patterns {
		if foldCase {
			if Glob(strings.ToLower(p), strings.ToLower(v)) {
				return true
			}
		} else if Glob(p, v) {
			return true
		}
	}
	return false
}

func anyResource(patterns []string, arn string) bool {
	for _, p := range patterns {
		if ArnLike(p, arn) {
			return true
		}
	}
	return false
}

// ArnLike matches arn against pattern the way IAM matches Resource and the
// ArnLike operator: "*" alone matches anything; otherwise both split into six
// colon-separated parts (the sixth keeps its colons) and each part is a
// wildcard match.
func ArnLike(pattern, arn string) bool {
	if pattern == "*" {
		return true
	}
	pp, ap := strings.SplitN(pattern, ":", 6), strings.SplitN(arn, ":", 6)
	if len(pp) != 6 || len(ap) != 6 {
		return Glob(pattern, arn)
	}
	for i := range pp {
		if !Glob(pp[i], ap[i]) {
			return false
		}
	}
	return true
}

// Glob matches s against pattern, where * matches any run of characters
// (including none) and ? exactly one.
func Glob(pattern, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case px < len(pattern) && pattern[px] == '*':
			star, mark = px, sx
			px++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// conditionsHold evaluates a Condition block: every operator, every key
// within it, must hold; within one key any value may match.
func conditionsHold(cond map[string]map[string][]string, ctx map[string]string) (bool, error) {
	ops := make([]string, 0, len(cond))
	for op := range cond {
		ops = append(ops, op)
	}
	sort.Strings(ops) // deterministic error messages
	for _, op := range ops {
		if op == "Null" {
			holds, err := nullHolds(cond[op], ctx)
			if err != nil || !holds {
				return false, err
			}
			continue
		}
		base, ifExists := strings.CutSuffix(op, "IfExists")
		test, negated, err := operator(base)
		if err != nil {
			return false, err
		}
		for key, want := range cond[op] {
			got, present := lookup(ctx, key)
			var holds bool
			switch {
			case !present && ifExists:
				holds = true
			case !present:
				holds = negated // a negated operator holds when the key is absent
			default:
				matched := false
				for _, w := range want {
					if test(w, got) {
						matched = true
						break
					}
				}
				holds = matched != negated
			}
			if !holds {
				return false, nil
			}
		}
	}
	return true, nil
}

// nullHolds evaluates a Null block: "true" holds when the key is absent from
// the request context, "false" when it is present.
func nullHolds(keys map[string][]string, ctx map[string]string) (bool, error) {
	for key, want := range keys {
		if len(want) != 1 {
			return false, fmt.Errorf("%w: Null %s with %d values", ErrUnsupported, key, len(want))
		}
		_, present := lookup(ctx, key)
		switch strings.ToLower(want[0]) {
		case "true":
			if present {
				return false, nil
			}
		case "false":
			if !present {
				return false, nil
			}
		default:
			return false, fmt.Errorf("%w: Null %s %q (want true or false)", ErrUnsupported, key, want[0])
		}
	}
	return true, nil
}

func operator(op string) (test func(want, got string) bool, negated bool, err error) {
	if strings.Contains(op, ":") {
		return nil, false, fmt.Errorf("%w: condition qualifier in %q", ErrUnsupported, op)
	}
	equal := func(w, g string) bool { return w == g }
	fold := func(w, g string) bool { return strings.EqualFold(w, g) }
	switch op {
	case "StringEquals":
		return equal, false, nil
	case "StringNotEquals":
		return equal, true, nil
	case "StringEqualsIgnoreCase":
		return fold, false, nil
	case "StringNotEqualsIgnoreCase":
		return fold, true, nil
	case "StringLike":
		return Glob, false, nil
	case "StringNotLike":
		return Glob, true, nil
	case "ArnEquals", "ArnLike":
		return ArnLike, false, nil
	case "ArnNotEquals", "ArnNotLike":
		return ArnLike, true, nil
	case "Bool":
		return fold, false, nil
	case "Null":
		return nil, false, fmt.Errorf("%w: NullIfExists", ErrUnsupported)
	}
	return nil, false, fmt.Errorf("%w: condition operator %q", ErrUnsupported, op)
}

// lookup finds a condition key; key names are case-insensitive.
func lookup(ctx map[string]string, key string) (string, bool) {
	if v, ok := ctx[key]; ok {
		return v, true
	}
	for k, v := range ctx {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return "", false
}

// ParsePolicy reads a policy document (JSON already resolved to plain
// values: strings, lists and maps).
func ParsePolicy(source string, doc any) (Policy, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return Policy{}, fmt.Errorf("%s: policy document is %T, want an object", source, doc)
	}
	p := Policy{Source: source}
	var raw []any
	switch s := m["Statement"].(type) {
	case []any:
		raw = s
	case map[string]any:
		raw = []any{s}
	default:
		return Policy{}, fmt.Errorf("%s: Statement is %T", source, m["Statement"])
	}
	for i, r := range raw {
		st, err := parseStatement(r)
		if err != nil {
			return Policy{}, fmt.Errorf("%s statement %d: %w", source, i, err)
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

func parseStatement(raw any) (Statement, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return Statement{}, fmt.Errorf("statement is %T", raw)
	}
	var st Statement
	var err error
	st.Sid, _ = m["Sid"].(string)
	switch e, _ := m["Effect"].(string); Effect(e) {
	case Allow, Deny:
		st.Effect = Effect(e)
	default:
		return Statement{}, fmt.Errorf("Effect %q", e)
	}
	for name, dst := range map[string]*[]string{"Action": &st.Action, "NotAction": &st.NotAction, "Resource": &st.Resource, "NotResource": &st.NotResource} {
		if *dst, err = strings1(m[name]); err != nil {
			return Statement{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	if _, ok := m["NotPrincipal"]; ok {
		return Statement{}, fmt.Errorf("%w: NotPrincipal", ErrUnsupported)
	}
	if pr, ok := m["Principal"]; ok {
		if st.Principal, err = parsePrincipal(pr); err != nil {
			return Statement{}, err
		}
	}
	if c, ok := m["Condition"]; ok {
		cm, ok := c.(map[string]any)
		if !ok {
			return Statement{}, fmt.Errorf("Condition is %T", c)
		}
		st.Condition = map[string]map[string][]string{}
		for op, keys := range cm {
			km, ok := keys.(map[string]any)
			if !ok {
				return Statement{}, fmt.Errorf("Condition %s is %T", op, keys)
			}
			st.Condition[op] = map[string][]string{}
			for k, v := range km {
				vals, err := strings1(v)
				if err != nil {
					return Statement{}, fmt.Errorf("Condition %s %s: %w", op, k, err)
				}
				st.Condition[op][k] = vals
			}
		}
	}
	return st, nil
}

func parsePrincipal(raw any) (*Principal, error) {
	if s, ok := raw.(string); ok {
		if s == "*" {
			return &Principal{Any: true}, nil
		}
		return nil, fmt.Errorf("Principal %q", s)
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Principal is %T", raw)
	}
	p := &Principal{}
	for k, v := range m {
		vals, err := strings1(v)
		if err != nil {
			return nil, fmt.Errorf("Principal %s: %w", k, err)
		}
		switch k {
		case "AWS":
			p.AWS = vals
		case "Service":
			p.Service = vals
		default:
			return nil, fmt.Errorf("%w: %s principal", ErrUnsupported, k)
		}
	}
	return p, nil
}

// strings1 reads a string-or-list-of-strings element; nil stays nil.
func strings1(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case bool:
		return []string{fmt.Sprint(t)}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element is %T, want a string (unresolved intrinsic?)", e)
			}
			out = append(out, s)
		}
		return out, nil
	case []string:
		return t, nil
	}
	b, _ := json.Marshal(v)
	return nil, fmt.Errorf("value %s is not a string or list of strings (unresolved intrinsic?)", b)
}
