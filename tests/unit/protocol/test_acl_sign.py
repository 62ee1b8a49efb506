"""ACL 1.0 signatures of remoting requests (AclClientRPCHook / PlainAccessValidator)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from pocketmq.protocol.acl_sign import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    V4_9_3,
    SessionCredentials,
    sign_request,
    signature,
    signing_content,
)
from pocketmq.protocol.remoting import RemotingCommand


def test_signature_matches_rocketmqs_own_test_vector() -> None:
    # AclSignerTest.calSignatureTest: "RocketMQ" signed with "12345678".
    assert signature(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_content_is_the_values_in_key_order_then_the_body() -> None:
    fields = {"topic": "T", "AccessKey": "ak", "b": "x", SIGNATURE: "ignored", "a": "1"}
    # Keys in Java order: AccessKey, a, b, topic (upper case sorts first).
    assert signing_content(fields, b"BODY", version=401) == b"ak1xTBODY"


def test_unique_key_flag_is_left_out_for_clients_up_to_4_9_3_only() -> None:
    fields = {UNIQUE_MSG_QUERY_FLAG: "true", "topic": "T"}
    assert signing_content(fields, b"", version=V4_9_3) == b"T"
    assert signing_content(fields, b"", version=V4_9_3 + 1) == b"trueT"


def test_sign_request_adds_the_key_token_and_a_verifiable_signature() -> None:
    cmd = RemotingCommand.request(10, {"topic": "T", "queueId": 1}, b"hello")
    sign_request(cmd, SessionCredentials("RocketMQ", "12345678", security_token="tok"))
    assert cmd.ext_fields[ACCESS_KEY] == "RocketMQ"
    assert cmd.ext_fields[SECURITY_TOKEN] == "tok"
    # Keys in Java order: AccessKey, SecurityToken, queueId, topic.
    content = b"RocketMQtok1Thello"
    digest = hmac.new(b"12345678", content, hashlib.sha1).digest()
    assert cmd.ext_fields[SIGNATURE] == base64.b64encode(digest).decode()


def test_signing_twice_replaces_the_old_signature() -> None:
    cmd = RemotingCommand.request(10, {"topic": "T"})
    creds = SessionCredentials("RocketMQ", "12345678")
    sign_request(cmd, creds)
    first = cmd.ext_fields[SIGNATURE]
    sign_request(cmd, creds)
    assert cmd.ext_fields[SIGNATURE] == first


def test_keys_sort_like_java_strings_by_utf16_code_units() -> None:
    # Java: U+10000 is the surrogate pair D800 DC00, below U+FFFF; Python's str order says
    # the opposite.
    fields = {"\uffff": "bmp", "\U00010000": "astral"}
    assert signing_content(fields, b"", version=401) == b"astralbmp"


def test_credentials_never_print_their_secret() -> None:
    creds = SessionCredentials("RocketMQ", "12345678")
    assert "12345678" not in repr(creds) and "RocketMQ" in repr(creds)
