"""ACL 1.0 request signatures over remoting, as RocketMQ's AclClientRPCHook makes them and its
PlainAccessValidator checks them. No I/O here.

The signed content of a request::

    the values of its ext fields (AccessKey and SecurityToken included, Signature left out),
    concatenated in the order of their keys (Java's String order: UTF-16 code units)
    + the body bytes

The signature is Base64(HmacSHA1(secret key, content)), sent in the ``Signature`` ext field.
Requests of clients older than 4.9.4 (version <= V4_9_3) signed before ``_UNIQUE_KEY_QUERY``
was added, so the broker leaves that field out for them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Final, NamedTuple

from pocketmq.protocol.remoting import RemotingCommand

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"
# MQVersion.Version.V4_9_3.ordinal(): up to this version _UNIQUE_KEY_QUERY is not signed.
V4_9_3: Final = 399


class SessionCredentials(NamedTuple):
    """An access key and its secret (and, optionally, a security token sent along)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __repr__(self) -> str:
        # Configs and errors get printed: the secret stays out of them.
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def _java_order(key: str) -> bytes:
    # Java's TreeMap<String> compares UTF-16 code units, which UTF-16-BE bytes sort like.
    return key.encode("utf-16-be")


def signing_content(ext_fields: Mapping[str, str], body: bytes, *, version: int) -> bytes:
    """The bytes a request's signature covers."""
    skip_unique = version <= V4_9_3
    values = "".join(
        ext_fields[key]
        for key in sorted(ext_fields, key=_java_order)
        if key != SIGNATURE and not (skip_unique and key == UNIQUE_MSG_QUERY_FLAG)
    )
    return values.encode("utf-8") + body


def signature(content: bytes, secret_key: str) -> str:
    """Base64 of HmacSHA1(secret_key, content), as AclSigner computes it."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_request(cmd: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add AccessKey (and SecurityToken) to a request and sign it, as AclClientRPCHook does."""
    fields = cmd.ext_fields
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    content = signing_content(fields, cmd.body, version=cmd.version)
    fields[SIGNATURE] = signature(content, credentials.secret_key)
