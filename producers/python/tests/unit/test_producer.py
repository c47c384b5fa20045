"""The producer's behaviour beyond the vectors: Python-specific input checks,
subject_ref, issued_at and the intent's seal, retries (of the send only),
errors, and what never leaves the process."""

from __future__ import annotations

import dataclasses
import json
import pickle
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from resetledger_producer import (
    Envelope,
    ExpiredError,
    IntentError,
    Message,
    Notification,
    Producer,
    ProducerError,
    PublishError,
    Workflow,
    envelope_digest,
    intent_binding,
    is_retryable,
)

from .fixtures import FakeKMS, FakeSQS, service_error

CANARY = "CANARY-token-7f3a9c"
ADDRESS = "player1001@example.com"
NOW = datetime(2026, 11, 30, 10, 40, tzinfo=timezone.utc)
SECRETS = (CANARY, ADDRESS, "Reset your password", "game.example.com")


def valid(**changes: Any) -> Notification:
    n = Notification(
        challenge_id="chal-7f3a9c01",
        channel="email",
        workflow=Workflow("single"),
        destination_ref="acct-1001:email",
        expires_at=datetime(2026, 11, 30, 10, 50, tzinfo=timezone.utc),
        template_id="reset-email",
        template_version="3",
        policy_version="policy-1",
        message=Message(to=ADDRESS, subject="Reset your password", body=f"https://game.example.com/reset?token={CANARY}"),
    )
    return dataclasses.replace(n, **changes)


def fake_kms(**kw: Any) -> FakeKMS:
    mac = {k: kw[k] for k in ("mac", "mac_err") if k in kw}
    return FakeKMS(kw.get("plaintext", bytes([7]) * 32), b"\x01\x02\x03", "arn:aws:kms:us-east-1:111122223333:key/k", kw.get("err"), **mac)


def producer(kms: FakeKMS, sqs: FakeSQS, **extra: Any) -> Producer:
    opts: dict[str, Any] = {"clock": lambda: NOW, "retry_base_delay": 0.001, "retry_max_delay": 0.002}
    opts.update(extra)
    return Producer("https://sqs.test/intents", "alias/reset-content", "alias/reset-intent", kms=kms, sqs=sqs, **opts)


def assert_no_secret(err: BaseException) -> None:
    """Fails unless err, however it is printed, chained or pickled, holds no secret."""
    views = [
        str(err),
        repr(err),
        "".join(traceback.format_exception(err)),
        repr(vars(err)),
        repr(pickle.dumps(err)),
    ]
    for view in views:
        for secret in SECRETS:
            assert secret not in view, f"error leaks {secret}: {view[:300]}"


def raises(p: Producer, n: Notification, cls: type[ProducerError]) -> Any:
    with pytest.raises(cls) as info:
        p.publish(n)
    assert_no_secret(info.value)
    return info.value


# Input the Go producer has no equivalent for: Python's types are not checked at run time.
CASES: list[tuple[str, Callable[[Notification], Notification], str, str]] = [
    ("lone surrogate in the body", lambda n: valid(message=Message(to=ADDRESS, body=f"reset \ud800 {CANARY}")), "message.body", "not valid UTF-8"),
    ("lone surrogate in the address", lambda n: valid(message=Message(to="\udfff" + ADDRESS, body="b")), "message.to", "not valid UTF-8"),
    ("lone surrogate in the subject", lambda n: valid(message=Message(to=ADDRESS, subject="\ud800", body="b")), "message.subject", "not valid UTF-8"),
    ("naive expiry", lambda n: valid(expires_at=datetime(2026, 11, 30, 10, 50)), "expires_at", "want a timezone-aware datetime"),
    ("expiry as a string", lambda n: valid(expires_at="2026-11-30T10:50:00Z"), "expires_at", "want a datetime"),
    ("expiry before year 1 in UTC", lambda n: valid(expires_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))), "expires_at", "year outside 0001..9999"),
    ("naive issued_at", lambda n: valid(issued_at=datetime(2026, 11, 30, 10, 39)), "issued_at", "want a timezone-aware datetime"),
    ("issued_at as a string", lambda n: valid(issued_at="2026-11-30T10:39:00Z"), "issued_at", "want a datetime"),
    ("issued_at before year 1 in UTC", lambda n: valid(issued_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))), "issued_at", "year outside 0001..9999"),
    ("challenge id as a number", lambda n: valid(challenge_id=1234), "challenge_id", "want a string"),
    ("no workflow", lambda n: valid(workflow=None), "workflow.kind", "unknown workflow (want single, dual or fallback)"),
    ("order as a string", lambda n: valid(workflow=Workflow("fallback", "email,sms")), "workflow.order", "want a sequence of channels"),  # type: ignore[arg-type]
    ("subject as a number", lambda n: valid(message=Message(to=ADDRESS, subject=7, body="b")), "message.subject", "want a string"),  # type: ignore[arg-type]
    ("no message", lambda n: valid(message=None), "message", "missing"),
    ("subject_ref with an address", lambda n: valid(subject_ref=ADDRESS), "subject_ref", "contains a character outside [A-Za-z0-9._:-]"),
    ("subject_ref with a phone number", lambda n: valid(subject_ref="+15555550123"), "subject_ref", "contains a character outside [A-Za-z0-9._:-]"),
    ("subject_ref of 257 characters", lambda n: valid(subject_ref="s" * 257), "subject_ref", "too long"),
    ("subject_ref as a number", lambda n: valid(subject_ref=1001), "subject_ref", "want a string"),
    ("subject_ref checked before expires_at", lambda n: valid(subject_ref="acct 1", expires_at=None), "subject_ref", "contains a character outside [A-Za-z0-9._:-]"),
]


@pytest.mark.parametrize(("edit", "field", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_python_input(edit: Callable[[Notification], Notification], field: str, reason: str) -> None:
    kms, sqs = fake_kms(), FakeSQS()
    err = raises(producer(kms, sqs), edit(valid()), IntentError)
    assert (err.field, err.reason) == (field, reason)
    assert kms.calls + len(sqs.bodies) == 0


def test_a_fallback_pair_validates_on_both_channels() -> None:
    p = producer(fake_kms(), FakeSQS())
    keys = {p.validate(valid(channel=c, workflow=Workflow("fallback", ["email", "sms"]))).dedupe_key for c in ("email", "sms")}
    assert len(keys) == 2 and all(len(k) == 64 for k in keys)


def test_the_message_repr_shows_nothing() -> None:
    n = valid()
    for view in (repr(n), str(n), repr(n.message)):
        for secret in SECRETS:
            assert secret not in view


class TestSubjectRef:
    def body(self, n: Notification) -> dict[str, Any]:
        sqs = FakeSQS()
        producer(fake_kms(), sqs).publish(n)
        parsed: dict[str, Any] = json.loads(sqs.bodies[0])
        return parsed

    def test_written_right_after_destination_ref(self) -> None:
        members = list(self.body(valid(subject_ref="acct-1001")))
        assert members[members.index("destination_ref") + 1] == "subject_ref"
        assert self.body(valid(subject_ref="acct-1001"))["subject_ref"] == "acct-1001"

    @pytest.mark.parametrize("none", [None, ""])
    def test_none_or_empty_is_left_out(self, none: str | None) -> None:
        assert "subject_ref" not in self.body(valid(subject_ref=none))

    def test_not_in_the_dedupe_key_or_the_content_hash(self) -> None:
        p = producer(fake_kms(), FakeSQS())
        assert p.validate(valid(subject_ref="acct-1001")) == p.validate(valid())


class TestIssuedAt:
    def test_none_is_the_clocks_time_written_after_subject_ref_and_sealed(self) -> None:
        kms, sqs = fake_kms(), FakeSQS()
        res = producer(kms, sqs).publish(valid(subject_ref="acct-1001"))
        assert res.issued_at == NOW
        body: dict[str, Any] = json.loads(sqs.bodies[0])
        assert body["issued_at"] == "2026-11-30T10:40:00Z"
        members = list(body)
        i = members.index("subject_ref")
        assert members[i : i + 3] == ["subject_ref", "issued_at", "expires_at"]
        assert members[-1] == "intent_mac"
        sent = Envelope(**body["sealed_content"])
        assert [m["Message"] for m in kms.mac_inputs] == [intent_binding(valid(subject_ref="acct-1001", issued_at=NOW), res.content_hash, sent)]

    def test_given_is_the_one_written_and_sealed_not_the_clocks(self) -> None:
        kms, sqs = fake_kms(), FakeSQS()
        issued = datetime(2026, 11, 30, 11, 38, 12, 500000, tzinfo=timezone(timedelta(hours=1)))
        res = producer(kms, sqs).publish(valid(issued_at=issued))
        assert res.issued_at == issued
        assert json.loads(sqs.bodies[0])["issued_at"] == "2026-11-30T10:38:12.5Z"
        message = kms.mac_inputs[0]["Message"]
        assert isinstance(message, bytes) and b"\nissued_at:22:2026-11-30T10:38:12.5Z\n" in message

    def test_expiry_is_checked_before_issued_at_as_the_go_producer_does(self) -> None:
        kms = fake_kms()
        raises(producer(kms, FakeSQS()), valid(expires_at=NOW, issued_at=NOW + timedelta(hours=1)), ExpiredError)
        # And a default issued_at (the clock) is never at or after a future expiry.
        assert producer(kms, FakeSQS()).validate(valid(expires_at=NOW + timedelta(microseconds=1))).issued_at == NOW
        assert kms.calls == 0

    def test_the_binding_changes_with_every_field_the_claim_decides_on_and_with_the_envelope(self) -> None:
        n = valid(issued_at=datetime(2026, 11, 30, 10, 39, tzinfo=timezone.utc))
        hash_ = "0" * 64
        env = Envelope(kms_key_id="arn:aws:kms:us-east-1:111122223333:key/k", edk="AAEC", nonce="AAECAwQFBgcICQoL", ct="AAECAwQFBgcICQoLDA0ODxAREhMU")
        base = intent_binding(n, hash_, env)
        assert base.startswith(b"resetledger-intent-binding/v3\nschema_version:1:3\n")
        assert base.endswith(f"\nenvelope:64:{envelope_digest(env)}\n".encode())
        edits: list[dict[str, Any]] = [
            {"challenge_id": "chal-7f3a9c02"},
            {"channel": "sms"},
            {"workflow": Workflow("dual")},
            {"workflow": Workflow("fallback", ("email", "sms"))},
            {"destination_ref": "acct-1002:email"},
            {"subject_ref": "acct-1001"},
            {"issued_at": datetime(2026, 11, 30, 10, 39, 0, 1000, tzinfo=timezone.utc)},
            {"expires_at": datetime(2099, 1, 1, tzinfo=timezone.utc)},
            {"template_id": "reset-email-2"},
            {"template_version": "4"},
            {"policy_version": "policy-2"},
        ]
        for edit in edits:
            assert intent_binding(dataclasses.replace(n, **edit), hash_, env) != base, edit
        assert intent_binding(n, "1" * 64, env) != base, "content hash"
        # One bit of ct (0x14 -> 0x15 in its last byte), or any other envelope member.
        env_edits: list[dict[str, Any]] = [
            {"ct": "AAECAwQFBgcICQoLDA0ODxAREhMV"},
            {"nonce": "AAECAwQFBgcICQoM"},
            {"edk": "AAED"},
            {"kms_key_id": "arn:aws:kms:us-east-1:111122223333:key/l"},
        ]
        for env_edit in env_edits:
            assert intent_binding(n, hash_, dataclasses.replace(env, **env_edit)) != base, env_edit
        with pytest.raises(IntentError) as info:
            intent_binding(valid(), hash_, env)
        assert info.value.field == "issued_at"


class TestRetries:
    """The send only, with the same sealed intent."""

    def test_transient_send_failures_are_retried(self) -> None:
        kms, sqs = fake_kms(), FakeSQS([service_error("RequestThrottled", 403), service_error("InternalError", 500)])
        res = producer(kms, sqs).publish(valid())
        assert (res.attempts, res.message_id) == (3, "msg-3")
        assert (len(kms.inputs), len(kms.mac_inputs)) == (1, 1), "sealed and signed once"
        assert len(set(sqs.bodies)) == 1, "every attempt sends the same body"

    def test_a_network_error_is_retried(self) -> None:
        from botocore.exceptions import EndpointConnectionError

        sqs = FakeSQS([EndpointConnectionError(endpoint_url="https://sqs.test"), ConnectionResetError()])
        assert producer(fake_kms(), sqs).publish(valid()).attempts == 3

    def test_a_definite_refusal_is_not_retried(self) -> None:
        sqs = FakeSQS([service_error("AWS.SimpleQueueService.NonExistentQueue", 400)])
        err = raises(producer(fake_kms(), sqs), valid(), PublishError)
        assert (err.stage, err.attempts, err.code) == ("send", 1, "ERR_PUBLISH")
        assert len(sqs.bodies) == 1

    def test_attempts_are_bounded(self) -> None:
        sqs = FakeSQS([service_error("ServiceUnavailable", 503) for _ in range(5)])
        err = raises(producer(fake_kms(), sqs, max_send_attempts=4), valid(), PublishError)
        assert err.attempts == 4
        assert "ServiceUnavailable" in str(err.__cause__)
        assert len(sqs.bodies) == 4

    def test_no_attempt_after_the_challenge_expired(self) -> None:
        sqs = FakeSQS([service_error("InternalError", 500), service_error("InternalError", 500)])
        p = producer(fake_kms(), sqs, retry_base_delay=5, retry_max_delay=5)
        err = raises(p, valid(expires_at=NOW + timedelta(milliseconds=1)), PublishError)
        assert "expires before the next" in str(err)
        assert len(sqs.bodies) == 1

    def test_a_kms_failure_is_not_retried_and_sends_nothing(self) -> None:
        kms, sqs = fake_kms(err=service_error("ThrottlingException", 400, "GenerateDataKey")), FakeSQS()
        err = raises(producer(kms, sqs), valid(), PublishError)
        assert (err.stage, err.attempts) == ("seal", 0)
        assert (kms.calls, len(sqs.bodies)) == (1, 0)

    def test_a_generate_mac_failure_is_not_retried_and_sends_nothing(self) -> None:
        kms, sqs = fake_kms(mac_err=service_error("AccessDeniedException", 400, "GenerateMac")), FakeSQS()
        err = raises(producer(kms, sqs), valid(), PublishError)
        assert (err.stage, err.attempts) == ("sign", 0)
        assert "GenerateMac" in str(err)
        assert (len(kms.mac_inputs), len(sqs.bodies)) == (1, 0)

    def test_a_mac_of_the_wrong_length_is_refused(self) -> None:
        kms, sqs = fake_kms(mac=bytes(16)), FakeSQS()
        err = raises(producer(kms, sqs), valid(), PublishError)
        assert err.stage == "sign"
        assert len(sqs.bodies) == 0

    def test_a_malformed_data_key_is_refused(self) -> None:
        kms, sqs = fake_kms(plaintext=bytes(16)), FakeSQS()
        err = raises(producer(kms, sqs), valid(), PublishError)
        assert err.stage == "seal"
        assert len(sqs.bodies) == 0

    def test_cancel_stops_the_waits_between_attempts(self) -> None:
        sqs = FakeSQS([service_error("InternalError", 500) for _ in range(50)])
        cancel = threading.Event()
        threading.Timer(0.05, cancel.set).start()
        p = producer(fake_kms(), sqs, max_send_attempts=50, retry_base_delay=30, retry_max_delay=30)
        started = time.monotonic()
        with pytest.raises(PublishError, match="cancelled after"):
            p.publish(valid(expires_at=NOW + timedelta(hours=1)), cancel=cancel)
        assert time.monotonic() - started < 10
        assert len(sqs.bodies) < 50

    def test_classification(self) -> None:
        assert not is_retryable(service_error("KMSInvalidStateException", 400))
        assert is_retryable(service_error("Whatever", 502))
        assert is_retryable(service_error("TooManyRequestsException", 400))
        assert is_retryable(TimeoutError())
        assert not is_retryable(ValueError("x"))


class TestErrors:
    def test_an_expired_challenge_is_its_own_error_before_any_call(self) -> None:
        kms = fake_kms()
        err = raises(producer(kms, FakeSQS()), valid(expires_at=NOW), ExpiredError)
        assert str(err) == "resetledger: publish chal-7f3a9c01/email: challenge already expired"
        assert err.code == "ERR_CHALLENGE_EXPIRED"
        assert kms.calls == 0

    @pytest.mark.parametrize(
        "n",
        [
            valid(destination_ref=ADDRESS),
            valid(challenge_id=f"chal\n{CANARY}"),
            valid(message=Message(to=ADDRESS, subject="Reset your password", body=CANARY * 5000)),
            valid(message=Message(to=ADDRESS, subject="Reset your password", body=f"\ud800{CANARY}")),
        ],
        ids=["address as destination_ref", "token in the challenge id", "message too large", "lone surrogate beside the token"],
    )
    def test_no_error_names_or_quotes_the_message(self, n: Notification) -> None:
        raises(producer(fake_kms(), FakeSQS()), n, IntentError)

    def test_the_constructor_needs_a_queue_the_content_key_and_the_intent_key(self) -> None:
        with pytest.raises(TypeError):
            Producer("", "k", "i", kms=fake_kms(), sqs=FakeSQS())
        with pytest.raises(TypeError):
            Producer("q", "", "i", kms=fake_kms(), sqs=FakeSQS())
        with pytest.raises(TypeError, match="intent_key_arn"):
            Producer("q", "k", "", kms=fake_kms(), sqs=FakeSQS())
        with pytest.raises(TypeError):
            Producer("q", "k", kms=fake_kms(), sqs=FakeSQS())  # type: ignore[call-arg]

    def test_every_error_is_a_producer_error(self) -> None:
        assert issubclass(IntentError, ProducerError) and issubclass(ExpiredError, ProducerError)
        assert issubclass(PublishError, ProducerError)


def test_the_default_clients_have_the_sdk_retries_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    p = Producer("https://sqs.test/intents", "k", "i")
    for client in (p._kms, p._sqs):
        assert getattr(client, "meta").config.retries["total_max_attempts"] == 1
