package handler

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/resetledger/resetledger/internal/operatorapi"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Operate makes the ledger writes an operator asks for, through the
// function URL (AuthType AWS_IAM). The caller is who AWS authenticated: the
// principal ARN in the request context Lambda builds after checking the
// request's SigV4 signature and the function's resource policy. Nothing in
// the body names the caller (operatorapi.Decode refuses unknown fields), so
// a client cannot record another identity than the credentials it signed
// with. A request without that context (AuthType NONE, or an invocation
// OperateUseCase is the operator use case (*resolve.Resolver).
type OperateUseCase interface {
	Resolve(ctx context.Context, key string, d ledger.Decision, reason, evidence string, w ledger.Worker) (ledger.Entry, error)
}

// that is not a URL request) is refused before anything is read.
type Operate struct {
	Deps
	UseCase OperateUseCase
}

// Handle serves one function URL request.
func (h *Operate) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	_, log := invocation(ctx, settings.Operate, h.Log)
	caller, err := Caller(req.RequestContext)
	if err != nil {
		log.Warn("operator request refused: no authenticated caller", "reason", err.Error())
		return answer(http.StatusForbidden, operatorapi.Response{Code: operatorapi.CodeUnauthenticated, Error: err.Error()}), nil
	}
	// The caller is logged: it is who AWS authenticated, no secret. The
	// body is not: its free text is the operator's.
	log = log.With("caller", caller)
	if req.RequestContext.HTTP.Method != http.MethodPost {
		return refuse(log, http.StatusMethodNotAllowed, operatorapi.CodeBadRequest, "want POST"), nil
	}
	body, err := requestBody(req)
	if err != nil {
		return refuse(log, http.StatusBadRequest, operatorapi.CodeBadRequest, err.Error()), nil
	}
	r, err := operatorapi.Decode(body)
	if err != nil {
		return refuse(log, http.StatusBadRequest, operatorapi.CodeBadRequest, err.Error()), nil
	}
	log = log.With("action", r.Action, "dedupe_key", r.DedupeKey, "decision", r.Decision)
	worker := ledger.Worker(operatorapi.WorkerPrefix + caller)
	e, err := h.UseCase.Resolve(ctx, r.DedupeKey, ledger.Decision(r.Decision), r.RecordedReason(), r.Evidence, worker)
	var (
		te *ledger.TransitionError
		fe *ledger.FieldError
	)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return refuse(log, http.StatusNotFound, operatorapi.CodeNotFound, "no ledger row with this dedupe key"), nil
	case errors.As(err, &te):
		resp := operatorapi.Response{Code: operatorapi.CodeNotResolvable, State: te.From.String(),
			Error: fmt.Sprintf("the row is %s: only unknown or quarantined rows can be resolved", te.From)}
		log.Info("operator request refused", "code", resp.Code, "state", resp.State)
		return answer(http.StatusConflict, resp), nil
	case errors.Is(err, ledger.ErrConflict):
		return refuse(log, http.StatusConflict, operatorapi.CodeConflict, "the row changed while resolving it (a sweep may have acted on it)"), nil
	case errors.As(err, &fe):
		resp := operatorapi.Response{Code: operatorapi.CodeInvalidField, Field: fe.Field, Error: fe.Reason}
		log.Info("operator request refused", "code", resp.Code, "field", fe.Field, "reason", fe.Reason)
		return answer(http.StatusBadRequest, resp), nil
	case err != nil:
		log.Error("operator request failed", "error", err.Error())
		return answer(http.StatusInternalServerError, operatorapi.Response{Code: operatorapi.CodeInternal, Error: "the ledger write failed; see the function's log"}), nil
	}
	i := len(e.History) - 1
	log.Info("operator decision recorded", "state", e.State.String(), "event_id", e.Last().ID)
	return answer(http.StatusOK, operatorapi.Response{
		DedupeKey: e.Key, ChallengeID: e.Identity.ChallengeID, Channel: string(e.Identity.Channel), State: e.State.String(),
		Entry: operatorapi.NewEntry(i, e.Last()),
	}), nil
}

// ErrNoCaller reports a request whose context names no IAM caller.
var ErrNoCaller = errors.New("handler: the request carries no IAM-authenticated caller (the function URL must use AuthType AWS_IAM)")

// Caller is the principal AWS authenticated for a function URL request
// with AuthType AWS_IAM: requestContext.authorizer.iam.userArn, as Lambda
// sets it (for an assumed role, the STS session ARN
// arn:aws:sts::<account>:assumed-role/<role>/<session>). It must be an ARN
// of the account in the same context, and printable.
func Caller(rc events.LambdaFunctionURLRequestContext) (string, error) {
	if rc.Authorizer == nil || rc.Authorizer.IAM == nil {
		return "", ErrNoCaller
	}
	iam := rc.Authorizer.IAM
	who := iam.UserARN
	if strings.TrimSpace(who) == "" {
		return "", ErrNoCaller
	}
	if len(who) > 2048 || operatorapi.CheckText(who, 0) != nil || strings.ContainsAny(who, " \t") {
		return "", fmt.Errorf("%w: userArn is not printable", ErrNoCaller)
	}
	a, err := arn.Parse(who)
	if err != nil {
		return "", fmt.Errorf("%w: userArn is not an ARN", ErrNoCaller)
	}
	if iam.AccountID == "" || a.AccountID != iam.AccountID {
		return "", fmt.Errorf("%w: userArn's account is not the authenticated account", ErrNoCaller)
	}
	return who, nil
}

// requestBody is the request's body, decoded from base64 where Lambda
// encoded it, and refused past operatorapi.MaxBody.
func requestBody(req events.LambdaFunctionURLRequest) ([]byte, error) {
	if len(req.Body) > 2*operatorapi.MaxBody {
		return nil, fmt.Errorf("body larger than %d bytes", operatorapi.MaxBody)
	}
	if !req.IsBase64Encoded {
		return []byte(req.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, errors.New("body is not valid base64")
	}
	return b, nil
}

func refuse(log *slog.Logger, status int, code, msg string) events.LambdaFunctionURLResponse {
	log.Info("operator request refused", "code", code, "reason", msg)
	return answer(status, operatorapi.Response{Code: code, Error: msg})
}

func answer(status int, r operatorapi.Response) events.LambdaFunctionURLResponse {
	b, err := json.Marshal(r)
	if err != nil {
		// A Response holds strings, ints and a time: it always marshals.
		b = []byte(`{"code":"internal","error":"response could not be encoded"}`)
		status = http.StatusInternalServerError
	}
	return events.LambdaFunctionURLResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
		Body:       string(b),
	}
}
