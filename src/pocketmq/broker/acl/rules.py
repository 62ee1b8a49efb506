"""The rules of plain_acl.yml (RocketMQ's ACL 1.0), read from its parsed YAML document: the
permission bits, accounts and the global white list. No I/O here (``service`` reads the file).

The file, as RocketMQ's ``conf/plain_acl.yml``::

    globalWhiteRemoteAddresses:      # requests from these need no signature at all
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ          # more than 6 characters
        secretKey: 12345678          # more than 6 characters
        whiteRemoteAddress: ""       # requests of this account from here: no signature check
        admin: false                 # admins may do everything, admin requests included
        defaultTopicPerm: DENY       # for topics not listed below (absent: DENY)
        defaultGroupPerm: SUB        # for groups not listed below (absent: DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

A permission is PUB, SUB, PUB|SUB (or SUB|PUB) or DENY; anything else reads as DENY. A group is
kept under its retry topic (``%RETRY%group``), as RocketMQ keeps it, which is also how requests
name it. An access key defined twice keeps its first definition (RocketMQ warns and does the
same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pocketmq.broker.acl.addresses import AddressMatcher, compile_pattern
from pocketmq.errors import ConfigError
from pocketmq.protocol.names import retry_topic

# RocketMQ's Permission bits.
DENY: Final = 1
ANY: Final = 1 << 1
PUB: Final = 1 << 2
SUB: Final = 1 << 3

_PERMS: Final = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
# AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: keys must be longer.
KEY_MIN_LENGTH: Final = 6


def parse_perm(text: object) -> int:
    """A permission name's bits; a missing or unknown one is DENY (parsePermFromString)."""
    return _PERMS.get(str(text).strip(), DENY) if text is not None else DENY


def perm_allows(needed: int, owned: int) -> bool:
    """Whether an owned permission grants a needed one (Permission.checkPermission)."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


@dataclass(frozen=True, slots=True, kw_only=True)
class Account:
    access_key: str
    secret_key: str
    white_remote_address: AddressMatcher
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    # Topic names and retry topics of groups -> permission bits.
    resource_perms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclRules:
    global_white: tuple[AddressMatcher, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)


def _text_list(doc: Mapping[str, object], key: str, where: str) -> list[str]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {key} must be a list")
    return [str(item) for item in value]


def _resource_perms(items: list[str], *, groups: bool, where: str) -> dict[str, int]:
    perms: dict[str, int] = {}
    for item in items:
        parts = [p for p in item.split("=") if p]
        if len(parts) != 2:
            kind = "groupPerms" if groups else "topicPerms"
            raise ConfigError(f"{where}: {kind} entry {item!r} is not NAME=PERM")
        name = parts[0].strip()
        perms[retry_topic(name) if groups else name] = parse_perm(parts[1])
    return perms


def _account(doc: object, index: int) -> Account:
    where = f"accounts[{index}]"
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    access_key, secret_key = doc.get("accessKey"), doc.get("secretKey")
    if access_key is None or secret_key is None:
        raise ConfigError(f"{where}: accessKey and secretKey are required")
    access_key, secret_key = str(access_key), str(secret_key)
    if len(access_key) <= KEY_MIN_LENGTH or len(secret_key) <= KEY_MIN_LENGTH:
        raise ConfigError(
            f"{where}: accessKey and secretKey must be longer than {KEY_MIN_LENGTH} characters"
        )
    admin = doc.get("admin", False)
    if not isinstance(admin, bool):
        admin = str(admin).strip().lower() == "true"
    perms = _resource_perms(_text_list(doc, "groupPerms", where), groups=True, where=where)
    perms.update(_resource_perms(_text_list(doc, "topicPerms", where), groups=False, where=where))
    white = doc.get("whiteRemoteAddress")
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=compile_pattern(None if white is None else str(white)),
        admin=admin,
        default_topic_perm=parse_perm(doc.get("defaultTopicPerm")),
        default_group_perm=parse_perm(doc.get("defaultGroupPerm")),
        resource_perms=perms,
    )


def rules_from_document(doc: object) -> AclRules:
    """The rules of a parsed plain_acl.yml; an empty document has none (every request refused).

    Raises:
        ConfigError: the document breaks the format (the message names the entry).
    """
    if doc is None:
        return AclRules()
    if not isinstance(doc, Mapping):
        raise ConfigError("plain_acl.yml: expected a mapping at the top")
    whites = tuple(
        compile_pattern(p) for p in _text_list(doc, "globalWhiteRemoteAddresses", "plain_acl.yml")
    )
    raw_accounts = doc.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise ConfigError("plain_acl.yml: accounts must be a list")
    accounts: dict[str, Account] = {}
    for index, raw in enumerate(raw_accounts):
        account = _account(raw, index)
        accounts.setdefault(account.access_key, account)
    return AclRules(whites, accounts)
