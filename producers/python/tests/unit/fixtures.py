"""Test helpers: the vector files and fake AWS clients."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

from resetledger_producer import Channel, DataKey, Envelope, Message, Notification, Workflow, WorkflowKind

VECTORS_DIR = Path(__file__).resolve().parents[4] / "testdata" / "vectors"
"""testdata/vectors of the repository (this package is producers/python)."""


def load_vectors(name: str) -> Any:
    return json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))


def text(t: object) -> str:
    """A string in a vector file: plain, or {"repeat": s, "count": n}."""
    if isinstance(t, str):
        return t
    d = cast(Mapping[str, Any], t)
    return str(d["repeat"]) * int(d["count"])


def parse_time(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def notification(v: Mapping[str, Any]) -> Notification:
    """The notification of a vector, as the package takes it (an empty
    expires_at becomes None, which the producer refuses)."""
    wf = v["workflow"]
    m = v["message"]
    return Notification(
        challenge_id=v["challenge_id"],
        channel=cast(Channel, v["channel"]),
        workflow=Workflow(kind=cast(WorkflowKind, wf["kind"]), order=tuple(wf.get("order", ()))),
        destination_ref=v["destination_ref"],
        subject_ref=v.get("subject_ref"),
        issued_at=parse_time(v["issued_at"]) if v.get("issued_at") else None,
        expires_at=cast(datetime, parse_time(v["expires_at"]) if v["expires_at"] else None),
        template_id=v["template_id"],
        template_version=v["template_version"],
        policy_version=v["policy_version"],
        message=Message(to=text(m["to"]), subject=text(m.get("subject", "")), body=text(m["body"])),
    )


class FakeKMS:
    """A KMS stand-in that hands out the given data key (or raises err) and
    answers GenerateMac with ``mac`` (or raises ``mac_err``). ``calls`` counts
    both calls; ``inputs`` holds the GenerateDataKey inputs, ``mac_inputs``
    the GenerateMac ones."""

    def __init__(
        self,
        plaintext: bytes,
        blob: bytes,
        key_id: str,
        err: Exception | None = None,
        *,
        mac: bytes = bytes([9]) * 32,
        mac_key_id: str = "arn:aws:kms:us-east-1:111122223333:key/intent",
        mac_err: Exception | None = None,
    ) -> None:
        self.plaintext, self.blob, self.key_id, self.err = plaintext, blob, key_id, err
        self.mac, self.mac_key_id, self.mac_err = mac, mac_key_id, mac_err
        self.inputs: list[dict[str, object]] = []
        self.mac_inputs: list[dict[str, object]] = []
        self.handed: list[bytearray] = []

    @property
    def calls(self) -> int:
        return len(self.inputs) + len(self.mac_inputs)

    def generate_mac(self, *, Message: bytes, KeyId: str, MacAlgorithm: Literal["HMAC_SHA_256"]) -> Mapping[str, object]:
        self.mac_inputs.append({"KeyId": KeyId, "MacAlgorithm": MacAlgorithm, "Message": Message})
        if self.mac_err is not None:
            raise self.mac_err
        return {"KeyId": self.mac_key_id, "MacAlgorithm": MacAlgorithm, "Mac": bytes(self.mac)}

    def generate_data_key(
        self, *, KeyId: str, KeySpec: Literal["AES_256"], EncryptionContext: Mapping[str, str]
    ) -> Mapping[str, object]:
        self.inputs.append({"KeyId": KeyId, "KeySpec": KeySpec, "EncryptionContext": dict(EncryptionContext)})
        if self.err is not None:
            raise self.err
        plaintext = bytearray(self.plaintext)
        self.handed.append(plaintext)
        return {"KeyId": self.key_id, "Plaintext": plaintext, "CiphertextBlob": bytes(self.blob)}


class FakeSQS:
    """An SQS stand-in: each call takes the next scripted error, or succeeds."""

    def __init__(self, errors: list[Exception] | None = None) -> None:
        self.errors = list(errors or [])
        self.bodies: list[str] = []
        self.queue_urls: list[str] = []

    def send_message(self, *, QueueUrl: str, MessageBody: str) -> Mapping[str, object]:
        self.bodies.append(MessageBody)
        self.queue_urls.append(QueueUrl)
        if self.errors:
            raise self.errors.pop(0)
        return {"MessageId": f"msg-{len(self.bodies)}"}


def service_error(code: str, status: int, operation: str = "SendMessage") -> Exception:
    """A botocore ClientError as the SDK raises it."""
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": code, "Message": f"fake {code}"}, "ResponseMetadata": {"HTTPStatusCode": status}},  # type: ignore[typeddict-item]
        operation,
    )


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def data_key(v: dict[str, Any]) -> DataKey:
    """What the vector's GenerateDataKey returned."""
    g = v["generate_data_key"]
    return DataKey(plaintext=bytes.fromhex(g["Plaintext_hex"]), ciphertext_blob=base64.b64decode(g["CiphertextBlob_base64"]), key_id=g["KeyId"])


def envelope(d: dict[str, Any]) -> Envelope:
    """A vector's sealed_content, of any version (dict only in version 3)."""
    return Envelope(v=d["v"], alg=d["alg"], kms_key_id=d["kms_key_id"], dict_id=d.get("dict"), edk=d["edk"], nonce=d["nonce"], ct=d["ct"])
