package iampolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Pseudo holds the values of the pseudo parameters a template is resolved
// with (the partition is always aws, the URL suffix amazonaws.com).
type Pseudo struct {
	Region  string
	Account string
}

// Stack is a CloudFormation template resolved to plain values: each
// resource's physical name is its construct id (the logical id without
// CDK's 8-character hash), unless the template names it explicitly.
type Stack struct {
	Pseudo    Pseudo
	Roles     map[string]*Role     // by role ARN
	Functions map[string]*Function // by function name
	// ResourcePolicies are the resource policies by resource ARN: KMS key
	// policies, SQS queue policies, SNS topic policies and DynamoDB table
	// resource policies. Use ResourcePolicy to find the one a request meets.
	ResourcePolicies map[string]*Policy
	// KMSKeys lists the ARNs of the template's KMS keys.
	KMSKeys map[string]bool
	// Tables maps a DynamoDB table ARN to its encryption key ARN ("" for an
	// AWS owned key) and stream ARN.
	Tables map[string]Table

	resources map[string]resource
}

// Role is an IAM role and the identity policies attached to it.
type Role struct {
	ARN      string
	Policies []Policy
	// Unevaluable says why the role's identity policies are not all known
	// (an AWS managed policy is attached, whose document the template does
	// not hold); Decide refuses to evaluate the role's requests then.
	Unevaluable string
}

// Function is a Lambda function with what the platform does with its role.
type Function struct {
	Name        string
	RoleARN     string
	LogGroupARN string
	// Sources are its event source mappings.
	Sources []EventSource
}

// EventSource is one event source mapping.
type EventSource struct {
	SourceARN    string // SQS queue or DynamoDB stream
	OnFailureARN string // on-failure destination, if any
}

// Table is a DynamoDB table.
type Table struct {
	KeyARN    string
	StreamARN string
}

type resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

var cdkHash = regexp.MustCompile(`[0-9A-F]{8}$`)

// ConstructName is the name a resource gets when the template does not name
// it: its logical id without CDK's hash suffix (LedgerTable0A1B2C3D ->
// LedgerTable). Test harnesses bind their own physical names to these.
func ConstructName(logicalID string) string {
	if len(logicalID) > 8 && cdkHash.MatchString(logicalID) {
		return logicalID[:len(logicalID)-8]
	}
	return logicalID
}

// LoadTemplate resolves a synthesized template.
func LoadTemplate(raw []byte, pseudo Pseudo) (*Stack, error) {
	var t struct {
		Resources map[string]resource `json:"Resources"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("iampolicy: template: %w", err)
	}
	s := &Stack{
		Pseudo: pseudo, Roles: map[string]*Role{}, Functions: map[string]*Function{},
		ResourcePolicies: map[string]*Policy{}, KMSKeys: map[string]bool{}, Tables: map[string]Table{},
		resources: t.Resources,
	}
	ids := make([]string, 0, len(t.Resources))
	for id := range t.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := s.load(id, t.Resources[id]); err != nil {
			return nil, fmt.Errorf("iampolicy: %s: %w", id, err)
		}
	}
	return s, nil
}

// load reads one resource of the template into the stack: roles and their
// policies (inline, and the template's own managed policies), key, queue and
// topic policies, tables with their resource policies, functions and their
// event sources. Other resource types hold nothing the evaluation needs.
func (s *Stack) load(id string, r resource) error {
	loaders := map[string]func(string, resource) error{
		"AWS::IAM::Role":                  s.loadRole,
		"AWS::IAM::Policy":                s.loadPolicy,
		"AWS::IAM::ManagedPolicy":         s.loadPolicy,
		"AWS::KMS::Key":                   s.loadKey,
		"AWS::SQS::QueuePolicy":           s.loadQueuePolicy,
		"AWS::SNS::TopicPolicy":           s.loadTopicPolicy,
		"AWS::DynamoDB::Table":            s.loadTable,
		"AWS::Lambda::Function":           s.loadFunction,
		"AWS::Lambda::EventSourceMapping": s.loadEventSource,
		"AWS::Lambda::ResourcePolicy":     s.loadLambdaPolicy,
		"AWS::Lambda::Permission":         s.loadLambdaPermission,
		"AWS::S3::BucketPolicy":           s.loadBucketPolicy,
	}
	if load, ok := loaders[r.Type]; ok {
		return load(id, r)
	}
	return nil
}

// prop is r's property name with its intrinsic functions resolved.
func (s *Stack) prop(r resource, name string) (any, error) { return s.resolve(r.Properties[name]) }

// policyProp parses r's property name as a policy document.
func (s *Stack) policyProp(r resource, name, source string) (Policy, error) {
	doc, err := s.prop(r, name)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(source, doc)
}

// stringProp is r's property name resolved, or "" if it is not a string.
func (s *Stack) stringProp(r resource, name string) (string, error) {
	v, err := s.prop(r, name)
	if err != nil {
		return "", err
	}
	out, _ := v.(string)
	return out, nil
}

// resolvedString is v resolved, or "" if it is not a string.
func (s *Stack) resolvedString(v any) (string, error) {
	r, err := s.resolve(v)
	if err != nil {
		return "", err
	}
	out, _ := r.(string)
	return out, nil
}

func (s *Stack) loadRole(id string, r resource) error {
	arn, _ := s.attr(id, "Arn")
	role := s.role(arn)
	if err := s.attachManaged(id, role, r.Properties["ManagedPolicyArns"]); err != nil {
		return err
	}
	pols, err := s.prop(r, "Policies")
	if err != nil {
		return err
	}
	list, _ := pols.([]any)
	for i, p := range list {
		pm, _ := p.(map[string]any)
		pol, err := ParsePolicy(fmt.Sprintf("%s inline policy %d", id, i), pm["PolicyDocument"])
		if err != nil {
			return err
		}
		role.Policies = append(role.Policies, pol)
	}
	return nil
}

// attachManaged attaches the managed policies a role lists. Only the
// template's own (a Ref to an AWS::IAM::ManagedPolicy) can be evaluated; an
// AWS managed policy's document is not in the template, so a role with one
// is marked Unevaluable (the template still loads: other principals'
// requests do not depend on that role's policies).
func (s *Stack) attachManaged(id string, role *Role, arns any) error {
	if arns == nil {
		return nil
	}
	list, _ := arns.([]any)
	for _, a := range list {
		m, _ := a.(map[string]any)
		ref, _ := m["Ref"].(string)
		if mp, ok := s.resources[ref]; !ok || mp.Type != "AWS::IAM::ManagedPolicy" {
			b, _ := json.Marshal(a)
			role.Unevaluable = fmt.Sprintf("managed policy %s is not the template's own, so its document is unknown", b)
			continue
		}
		if roles, _ := s.resources[ref].Properties["Roles"].([]any); refersTo(roles, id) {
			continue // the policy attaches itself through its Roles (loadPolicy)
		}
		pol, err := s.policyProp(s.resources[ref], "PolicyDocument", ref)
		if err != nil {
			return err
		}
		role.Policies = append(role.Policies, pol)
	}
	return nil
}

// refersTo reports whether list holds a Ref to id.
func refersTo(list []any, id string) bool {
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && m["Ref"] == id {
			return true
		}
	}
	return false
}

// loadPolicy attaches an inline (AWS::IAM::Policy) or managed
// (AWS::IAM::ManagedPolicy) policy to the roles its Roles property names.
func (s *Stack) loadPolicy(id string, r resource) error {
	pol, err := s.policyProp(r, "PolicyDocument", id)
	if err != nil {
		return err
	}
	roles, err := s.prop(r, "Roles")
	if err != nil {
		return err
	}
	names, err := strings1(roles)
	if err != nil {
		return fmt.Errorf("Roles: %w", err)
	}
	for _, name := range names {
		role := s.role("arn:aws:iam::" + s.Pseudo.Account + ":role/" + name)
		role.Policies = append(role.Policies, pol)
	}
	return nil
}

func (s *Stack) loadKey(id string, r resource) error {
	arn, _ := s.attr(id, "Arn")
	s.KMSKeys[arn] = true
	pol, err := s.policyProp(r, "KeyPolicy", id+" key policy")
	if err != nil {
		return err
	}
	return s.setResourcePolicy(arn, pol)
}

func (s *Stack) loadQueuePolicy(id string, r resource) error {
	pol, err := s.policyProp(r, "PolicyDocument", id)
	if err != nil {
		return err
	}
	qs, _ := r.Properties["Queues"].([]any)
	for _, q := range qs {
		m, _ := q.(map[string]any)
		ref, _ := m["Ref"].(string)
		arn, err := s.attr(ref, "Arn")
		if err != nil {
			return fmt.Errorf("Queues: %w", err)
		}
		if err := s.setResourcePolicy(arn, pol); err != nil {
			return err
		}
	}
	return nil
}

// loadTopicPolicy reads an SNS topic policy; its Topics are Refs, which
// resolve to the topics' ARNs.
func (s *Stack) loadTopicPolicy(id string, r resource) error {
	pol, err := s.policyProp(r, "PolicyDocument", id)
	if err != nil {
		return err
	}
	topics, err := s.prop(r, "Topics")
	if err != nil {
		return err
	}
	arns, err := strings1(topics)
	if err != nil {
		return fmt.Errorf("Topics: %w", err)
	}
	for _, arn := range arns {
		if err := s.setResourcePolicy(arn, pol); err != nil {
			return err
		}
	}
	return nil
}

// setResourcePolicy records pol (a copy of it) as arn's resource policy. A
// resource has one: two policy resources for one queue or topic would
// replace each other in an order CloudFormation does not promise.
func (s *Stack) setResourcePolicy(arn string, pol Policy) error {
	if prev, ok := s.ResourcePolicies[arn]; ok {
		return fmt.Errorf("%w: %s has two resource policies (%s and %s); the later one would replace the other", ErrUnsupported, arn, prev.Source, pol.Source)
	}
	p := pol
	p.Statements = append([]Statement(nil), pol.Statements...)
	s.ResourcePolicies[arn] = &p
	return nil
}

func (s *Stack) loadTable(id string, r resource) error {
	arn, _ := s.attr(id, "Arn")
	stream, _ := s.attr(id, "StreamArn")
	key := ""
	if sse, _ := r.Properties["SSESpecification"].(map[string]any); sse != nil {
		var err error
		if key, err = s.resolvedString(sse["KMSMasterKeyId"]); err != nil {
			return err
		}
	}
	s.Tables[arn] = Table{KeyARN: key, StreamARN: stream}
	if rp, _ := r.Properties["ResourcePolicy"].(map[string]any); rp != nil {
		doc, err := s.resolve(rp["PolicyDocument"])
		if err != nil {
			return err
		}
		pol, err := ParsePolicy(id+" resource policy", doc)
		if err != nil {
			return err
		}
		return s.setResourcePolicy(arn, pol)
	}
	return nil
}

// loadBucketPolicy reads an S3 bucket policy; its Bucket is a Ref (the
// bucket's name) or a name. ResourcePolicy finds it for the bucket's ARN and
// for each of its objects' (arn:aws:s3:::<bucket>/<key>).
func (s *Stack) loadBucketPolicy(id string, r resource) error {
	bucket, err := s.stringProp(r, "Bucket")
	if err != nil {
		return err
	}
	pol, err := s.policyProp(r, "PolicyDocument", id)
	if err != nil {
		return err
	}
	return s.setResourcePolicy("arn:aws:s3:::"+bucket, pol)
}

// loadLambdaPolicy reads a function's whole resource policy
// (AWS::Lambda::ResourcePolicy); its ResourceArn names the function.
func (s *Stack) loadLambdaPolicy(id string, r resource) error {
	arn, err := s.stringProp(r, "ResourceArn")
	if err != nil {
		return err
	}
	pol, err := s.policyProp(r, "PolicyDocument", id)
	if err != nil {
		return err
	}
	return s.setResourcePolicy(arn, pol)
}

// loadLambdaPermission adds one AWS::Lambda::Permission to its function's
// resource policy, as Lambda's AddPermission does: an Allow of Action to
// Principal (an ARN or an account), with the conditions its
// FunctionUrlAuthType and InvokedViaFunctionUrl add. A function has either
// permissions or an AWS::Lambda::ResourcePolicy here, not both.
func (s *Stack) loadLambdaPermission(id string, r resource) error {
	fn, err := s.stringProp(r, "FunctionName")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(fn, "arn:") {
		fn = "arn:aws:lambda:" + s.Pseudo.Region + ":" + s.Pseudo.Account + ":function:" + fn
	}
	action, err := s.stringProp(r, "Action")
	if err != nil {
		return err
	}
	who, err := s.stringProp(r, "Principal")
	if err != nil {
		return err
	}
	for _, unsupported := range []string{"PrincipalOrgID", "EventSourceToken"} {
		if _, ok := r.Properties[unsupported]; ok {
			return fmt.Errorf("%w: AWS::Lambda::Permission %s", ErrUnsupported, unsupported)
		}
	}
	st := Statement{Sid: id, Effect: Allow, Action: []string{action}, Resource: []string{fn}, Condition: map[string]map[string][]string{}}
	switch {
	case strings.HasSuffix(who, ".amazonaws.com"):
		st.Principal = &Principal{Service: []string{who}}
	case strings.HasPrefix(who, "arn:"):
		st.Principal = &Principal{AWS: []string{who}}
	default:
		st.Principal = &Principal{AWS: []string{"arn:aws:iam::" + who + ":root"}}
	}
	for prop, cond := range map[string][2]string{"SourceArn": {"ArnLike", "aws:SourceArn"}, "SourceAccount": {"StringEquals", "aws:SourceAccount"}} {
		if _, ok := r.Properties[prop]; !ok {
			continue
		}
		v, err := s.stringProp(r, prop)
		if err != nil {
			return err
		}
		st.Condition[cond[0]] = map[string][]string{cond[1]: {v}}
	}
	if v, ok := r.Properties["FunctionUrlAuthType"].(string); ok {
		st.Condition["StringEquals"] = map[string][]string{"lambda:FunctionUrlAuthType": {v}}
	}
	if v, ok := r.Properties["InvokedViaFunctionUrl"]; ok {
		st.Condition["Bool"] = map[string][]string{"lambda:InvokedViaFunctionUrl": {fmt.Sprint(v)}}
	}
	pol := s.ResourcePolicies[fn]
	if pol == nil {
		pol = &Policy{Source: fn + " permissions"}
		s.ResourcePolicies[fn] = pol
	} else if !strings.HasSuffix(pol.Source, " permissions") {
		return fmt.Errorf("%w: %s has a resource policy (%s) and permissions", ErrUnsupported, fn, pol.Source)
	}
	pol.Statements = append(pol.Statements, st)
	return nil
}

func (s *Stack) loadFunction(id string, r resource) error {
	name, err := s.ref(id)
	if err != nil {
		return err
	}
	fn := s.function(name)
	if fn.RoleARN, err = s.stringProp(r, "Role"); err != nil {
		return err
	}
	if lc, _ := r.Properties["LoggingConfig"].(map[string]any); lc != nil {
		group, err := s.resolvedString(lc["LogGroup"])
		if err != nil {
			return err
		}
		fn.LogGroupARN = "arn:aws:logs:" + s.Pseudo.Region + ":" + s.Pseudo.Account + ":log-group:" + group + ":*"
	}
	return nil
}

func (s *Stack) loadEventSource(_ string, r resource) error {
	name, err := s.stringProp(r, "FunctionName")
	if err != nil {
		return err
	}
	src, err := s.stringProp(r, "EventSourceArn")
	if err != nil {
		return err
	}
	es := EventSource{SourceARN: src}
	if dc, _ := r.Properties["DestinationConfig"].(map[string]any); dc != nil {
		of, _ := dc["OnFailure"].(map[string]any)
		if es.OnFailureARN, err = s.resolvedString(of["Destination"]); err != nil {
			return err
		}
	}
	fn := s.function(name)
	fn.Sources = append(fn.Sources, es)
	return nil
}

func (s *Stack) role(arn string) *Role {
	return getOrAdd(s.Roles, arn, func() *Role { return &Role{ARN: arn} })
}

func (s *Stack) function(name string) *Function {
	return getOrAdd(s.Functions, name, func() *Function { return &Function{Name: name} })
}

func getOrAdd[V any](m map[string]*V, k string, create func() *V) *V {
	if v, ok := m[k]; ok {
		return v
	}
	v := create()
	m[k] = v
	return v
}

// name is a resource's physical name: the template's explicit name property,
// or its construct name.
func (s *Stack) name(id string) (string, error) {
	r, ok := s.resources[id]
	if !ok {
		return "", fmt.Errorf("no resource %q", id)
	}
	prop := map[string]string{
		"AWS::DynamoDB::Table": "TableName", "AWS::SQS::Queue": "QueueName", "AWS::Lambda::Function": "FunctionName",
		"AWS::Logs::LogGroup": "LogGroupName", "AWS::IAM::Role": "RoleName", "AWS::SNS::Topic": "TopicName",
		"AWS::IAM::ManagedPolicy": "ManagedPolicyName", "AWS::SES::ConfigurationSet": "Name",
		"AWS::SMSVOICE::ConfigurationSet": "ConfigurationSetName", "AWS::Events::Rule": "Name",
		"AWS::S3::Bucket": "BucketName",
	}[r.Type]
	if prop != "" {
		if v, ok := r.Properties[prop].(string); ok && v != "" {
			return v, nil
		}
	}
	return ConstructName(id), nil
}

func (s *Stack) ref(id string) (string, error) {
	switch id {
	case "AWS::Region":
		return s.Pseudo.Region, nil
	case "AWS::AccountId":
		return s.Pseudo.Account, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	r, ok := s.resources[id]
	if !ok {
		return "", fmt.Errorf("Ref to unknown resource %q", id)
	}
	name, err := s.name(id)
	if err != nil {
		return "", err
	}
	switch r.Type {
	case "AWS::SQS::Queue":
		return "https://sqs." + s.Pseudo.Region + ".amazonaws.com/" + s.Pseudo.Account + "/" + name, nil
	case "AWS::SNS::Topic":
		return s.attr(id, "Arn")
	case "AWS::IAM::ManagedPolicy":
		return "arn:aws:iam::" + s.Pseudo.Account + ":policy/" + name, nil
	case "AWS::SecretsManager::Secret":
		// The real ARN ends in a random suffix; a harness binds its secret's
		// name and suffix to the construct name (awscall.WebhookSecret).
		return "arn:aws:secretsmanager:" + s.Pseudo.Region + ":" + s.Pseudo.Account + ":secret:" + name, nil
	}
	return name, nil
}

func (s *Stack) attr(id, attr string) (string, error) {
	r, ok := s.resources[id]
	if !ok {
		return "", fmt.Errorf("GetAtt of unknown resource %q", id)
	}
	name, err := s.name(id)
	if err != nil {
		return "", err
	}
	region, account := s.Pseudo.Region, s.Pseudo.Account
	switch r.Type + "." + attr {
	case "AWS::DynamoDB::Table.Arn":
		return "arn:aws:dynamodb:" + region + ":" + account + ":table/" + name, nil
	case "AWS::DynamoDB::Table.StreamArn":
		return "arn:aws:dynamodb:" + region + ":" + account + ":table/" + name + "/stream/latest", nil
	case "AWS::SQS::Queue.Arn":
		return "arn:aws:sqs:" + region + ":" + account + ":" + name, nil
	case "AWS::SQS::Queue.QueueName":
		return name, nil
	case "AWS::KMS::Key.Arn":
		return "arn:aws:kms:" + region + ":" + account + ":key/" + name, nil
	case "AWS::IAM::Role.Arn":
		return "arn:aws:iam::" + account + ":role/" + name, nil
	case "AWS::Lambda::Function.Arn":
		return "arn:aws:lambda:" + region + ":" + account + ":function:" + name, nil
	case "AWS::Logs::LogGroup.Arn":
		return "arn:aws:logs:" + region + ":" + account + ":log-group:" + name + ":*", nil
	case "AWS::SNS::Topic.Arn":
		return "arn:aws:sns:" + region + ":" + account + ":" + name, nil
	case "AWS::SecretsManager::Secret.Id":
		return s.ref(id)
	case "AWS::S3::Bucket.Arn":
		return "arn:aws:s3:::" + name, nil
	case "AWS::Events::Rule.Arn":
		return "arn:aws:events:" + region + ":" + account + ":rule/" + name, nil
	}
	return "", fmt.Errorf("%w: Fn::GetAtt %s.%s (%s)", ErrUnsupported, id, attr, r.Type)
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// resolve replaces the intrinsic functions in v.
func (s *Stack) resolve(v any) (any, error) {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := s.resolve(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		if len(t) == 1 {
			for k, arg := range t {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return s.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			r, err := s.resolve(e)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// intrinsic evaluates one intrinsic function of the template (Ref and the
// Fn:: functions the CDK emits for this stack).
func (s *Stack) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		id, _ := arg.(string)
		return s.ref(id)
	case "Fn::GetAtt":
		return s.fnGetAtt(arg)
	case "Fn::Join":
		return s.fnJoin(arg)
	case "Fn::Sub":
		return s.fnSub(arg)
	case "Fn::Select":
		return s.fnSelect(arg)
	case "Fn::Split":
		return s.fnSplit(arg)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupported, fn)
}

// pair returns the two arguments of fn, which take exactly two.
func pair(fn string, arg any) ([]any, error) {
	parts, _ := arg.([]any)
	if len(parts) != 2 {
		return nil, fmt.Errorf("%s %v", fn, arg)
	}
	return parts, nil
}

func (s *Stack) fnGetAtt(arg any) (any, error) {
	parts, err := pair("Fn::GetAtt", arg)
	if err != nil {
		return nil, err
	}
	id, _ := parts[0].(string)
	at, _ := parts[1].(string)
	return s.attr(id, at)
}

func (s *Stack) fnJoin(arg any) (any, error) {
	parts, err := pair("Fn::Join", arg)
	if err != nil {
		return nil, err
	}
	sep, _ := parts[0].(string)
	list, err := s.resolve(parts[1])
	if err != nil {
		return nil, err
	}
	strs, err := strings1(list)
	if err != nil {
		return nil, fmt.Errorf("Fn::Join: %w", err)
	}
	return strings.Join(strs, sep), nil
}

// fnSub substitutes ${name} from the variables given, then
// ${resource.attribute}, then ${resource or pseudo parameter}.
func (s *Stack) fnSub(arg any) (any, error) {
	tmpl, vars := "", map[string]any{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		tmpl, _ = a[0].(string)
		if len(a) > 1 {
			vars, _ = a[1].(map[string]any)
		}
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		var v any
		var err error
		if raw, ok := vars[name]; ok {
			v, err = s.resolve(raw)
		} else if id, at, ok := strings.Cut(name, "."); ok {
			v, err = s.attr(id, at)
		} else {
			v, err = s.ref(name)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		str, _ := v.(string)
		return str
	})
	return out, firstErr
}

func (s *Stack) fnSelect(arg any) (any, error) {
	a, err := pair("Fn::Select", arg)
	if err != nil {
		return nil, err
	}
	idx, _ := a[0].(float64)
	list, err := s.resolve(a[1])
	if err != nil {
		return nil, err
	}
	l, _ := list.([]any)
	if int(idx) >= len(l) {
		return nil, fmt.Errorf("Fn::Select index %v of %d", idx, len(l))
	}
	return l[int(idx)], nil
}

func (s *Stack) fnSplit(arg any) (any, error) {
	a, err := pair("Fn::Split", arg)
	if err != nil {
		return nil, err
	}
	sep, _ := a[0].(string)
	str, err := s.resolvedString(a[1])
	if err != nil {
		return nil, err
	}
	var out []any
	for _, p := range strings.Split(str, sep) {
		out = append(out, p)
	}
	return out, nil
}

// Decide evaluates one request of a role the template defines: its identity
// policies, and the resource's policy when the template defines one.
func (s *Stack) Decide(roleARN, action, resourceARN string, ctx map[string]string) (Decision, error) {
	role, ok := s.Roles[roleARN]
	if !ok {
		return Decision{}, fmt.Errorf("iampolicy: no role %s in the template", roleARN)
	}
	if role.Unevaluable != "" {
		return Decision{}, fmt.Errorf("%w: role %s: %s", ErrUnsupported, roleARN, role.Unevaluable)
	}
	req := Request{Principal: roleARN, Account: s.Pseudo.Account, Action: action, Resource: resourceARN, Context: ctx}
	return s.Authorize(req, role.Policies)
}

// Authorize evaluates req, made with the identity policies given (none for a
// service principal), against the resource policy the template gives
// req.Resource (see ResourcePolicy). It is how a principal the template does
// not define, such as a producer or another role of the account, is
// evaluated. The request is made over TLS (aws:SecureTransport is true)
// unless req.Context says otherwise.
func (s *Stack) Authorize(req Request, identity []Policy) (Decision, error) {
	full := map[string]string{"aws:SecureTransport": "true"}
	for k, v := range req.Context {
		full[k] = v
	}
	req.Context = full
	return Evaluate(req, identity, s.ResourcePolicy(req.Resource), s.KMSKeys[req.Resource])
}

// ResourcePolicy is the resource policy a request on arn meets: the
// resource's own; for a DynamoDB index (table/T/index/I) its table's, which
// governs the table's indexes; for an S3 object (arn:aws:s3:::B/K) its
// bucket's; for a qualified Lambda function ARN (function:F:Q) the
// function's. Nil when there is none. (A stream's policy is its own; the
// template gives streams none.)
//
// A qualified invocation meets the function's policy with the qualified ARN
// as its resource, so a statement whose Resource names only the unqualified
// ARN does not apply to it. That is how Lambda treats $LATEST, which has no
// policy of its own; a published version or an alias has its own policy,
// which a template that publishes none cannot give it, so this evaluator
// models the qualifier $LATEST (the only one such a stack's functions have).
func (s *Stack) ResourcePolicy(arn string) *Policy {
	if p, ok := s.ResourcePolicies[arn]; ok {
		return p
	}
	if parts := strings.Split(arn, ":"); len(parts) == 8 && strings.HasPrefix(arn, "arn:aws:lambda:") && parts[5] == "function" {
		return s.ResourcePolicies[strings.Join(parts[:7], ":")]
	}
	if bucket, _, ok := strings.Cut(arn, "/"); ok && strings.HasPrefix(arn, "arn:aws:s3:::") {
		return s.ResourcePolicies[bucket]
	}
	if strings.HasPrefix(arn, "arn:aws:dynamodb:") {
		if table, _, ok := strings.Cut(arn, "/index/"); ok {
			return s.ResourcePolicies[table]
		}
	}
	return nil
}

// ARN is the ARN of the one resource of type typ whose construct name (see
// ConstructName) is name: ARN("AWS::KMS::Key", "ContentKey").
func (s *Stack) ARN(typ, name string) (string, error) {
	var ids []string
	for id, r := range s.resources {
		if r.Type == typ && ConstructName(id) == name {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		sort.Strings(ids)
		return "", fmt.Errorf("iampolicy: want one %s named %s in the template, found %d %v", typ, name, len(ids), ids)
	}
	return s.attr(ids[0], "Arn")
}

// ErrNoStatement reports that a policy has no statement with the Sid asked for.
var ErrNoStatement = errors.New("iampolicy: no statement with that Sid")

// Without returns a copy of p without its statements whose Sid is sid, or
// ErrNoStatement if it has none.
func (p Policy) Without(sid string) (Policy, error) {
	out := p
	out.Statements = nil
	for _, st := range p.Statements {
		if st.Sid != sid {
			out.Statements = append(out.Statements, st)
		}
	}
	if len(out.Statements) == len(p.Statements) {
		return Policy{}, fmt.Errorf("%w: %s in %s", ErrNoStatement, sid, p.Source)
	}
	return out, nil
}

// WithoutStatement returns a copy of s in which the resource policy of
// resourceARN lacks its statement sid: what the stack would be without that
// statement. s itself is unchanged. ErrNoStatement if there is no such
// statement; an error if the resource has no policy.
func (s *Stack) WithoutStatement(resourceARN, sid string) (*Stack, error) {
	pol, ok := s.ResourcePolicies[resourceARN]
	if !ok {
		return nil, fmt.Errorf("%w: %s has no resource policy", ErrNoStatement, resourceARN)
	}
	without, err := pol.Without(sid)
	if err != nil {
		return nil, err
	}
	cp := *s
	cp.ResourcePolicies = make(map[string]*Policy, len(s.ResourcePolicies))
	for k, v := range s.ResourcePolicies {
		cp.ResourcePolicies[k] = v
	}
	cp.ResourcePolicies[resourceARN] = &without
	return &cp, nil
}

// WithoutRoleStatement returns a copy of s in which the identity policies of
// roleARN lack their statements sid: what the stack would be without that
// statement of the role. s itself is unchanged. ErrNoStatement if none of
// the role's policies has such a statement; an error if there is no such
// role.
func (s *Stack) WithoutRoleStatement(roleARN, sid string) (*Stack, error) {
	role, ok := s.Roles[roleARN]
	if !ok {
		return nil, fmt.Errorf("iampolicy: no role %s in the template", roleARN)
	}
	cp := *role
	cp.Policies = nil
	removed := false
	for _, pol := range role.Policies {
		without, err := pol.Without(sid)
		switch {
		case errors.Is(err, ErrNoStatement):
			cp.Policies = append(cp.Policies, pol)
		case err != nil:
			return nil, err
		default:
			removed = true
			cp.Policies = append(cp.Policies, without)
		}
	}
	if !removed {
		return nil, fmt.Errorf("%w: %s in role %s", ErrNoStatement, sid, roleARN)
	}
	st := *s
	st.Roles = make(map[string]*Role, len(s.Roles))
	for k, v := range s.Roles {
		st.Roles[k] = v
	}
	st.Roles[roleARN] = &cp
	return &st, nil
}
