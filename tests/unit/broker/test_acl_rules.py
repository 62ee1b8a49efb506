"""The ACL core: plain_acl.yml's model, address patterns, the decision and the remoting
request table (RocketMQ's PlainPermissionManager, PlainAccessResource, Permission)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.acl import AclDenied, check, rules_from_document
from pocketmq.broker.acl.addresses import compile_pattern
from pocketmq.broker.acl.remoting import remoting_access
from pocketmq.broker.acl.rules import ANY, DENY, PUB, SUB, parse_perm, perm_allows
from pocketmq.errors import ConfigError
from pocketmq.protocol.acl_sign import SessionCredentials, sign_request
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.remoting import RemotingCommand

# The example of RocketMQ's distribution/conf/plain_acl.yml, in its own layout.
PLAIN_ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""
RULES = rules_from_document(yaml.safe_load(PLAIN_ACL))
USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")
CLIENT = "127.0.0.1"


def signed(
    code: int,
    fields: dict[str, Any],
    body: bytes = b"",
    creds: SessionCredentials | None = USER,
) -> RemotingCommand:
    cmd = RemotingCommand.request(code, fields, body)
    if creds is not None:
        sign_request(cmd, creds)
    return cmd


def refusal(cmd: RemotingCommand, host: str = CLIENT) -> str | None:
    try:
        check(RULES, remoting_access(cmd, host))
    except AclDenied as exc:
        return str(exc)
    return None


# ------------------------------------------------------------------ the file's model


def test_the_distribution_example_reads_as_rocketmq_reads_it() -> None:
    user = RULES.accounts["RocketMQ"]
    assert not user.admin
    assert (user.default_topic_perm, user.default_group_perm) == (DENY, SUB)
    assert user.resource_perms == {
        "topicA": DENY, "topicB": PUB | SUB, "topicC": SUB,
        "%RETRY%groupA": DENY, "%RETRY%groupB": PUB | SUB, "%RETRY%groupC": SUB,
    }  # fmt: skip
    admin = RULES.accounts["rocketmq2"]
    assert admin.admin and admin.resource_perms == {}
    assert admin.white_remote_address("192.168.1.77")
    assert not user.white_remote_address("192.168.1.77")  # blank matches nothing


@pytest.mark.parametrize(
    ("text", "bits"),
    [("PUB", PUB), ("SUB", SUB), ("PUB|SUB", PUB | SUB), ("SUB|PUB", PUB | SUB),
     (" DENY ", DENY), ("ANY", DENY), ("pub", DENY), (None, DENY)],
)  # fmt: skip
def test_permission_names(text: str | None, bits: int) -> None:
    assert parse_perm(text) == bits


@pytest.mark.parametrize(
    ("needed", "owned", "allowed"),
    [(PUB, PUB, True), (PUB, SUB, False), (SUB, PUB | SUB, True), (ANY, SUB, True),
     (ANY, PUB, True), (ANY, DENY, False), (PUB, PUB | DENY, False), (SUB, 0, False)],
)  # fmt: skip
def test_permission_check(needed: int, owned: int, allowed: bool) -> None:
    assert perm_allows(needed, owned) is allowed


@pytest.mark.parametrize(
    ("doc", "complaint"),
    [
        ({"accounts": [{"accessKey": "short", "secretKey": "12345678"}]}, "longer than 6"),
        ({"accounts": [{"accessKey": "RocketMQ"}]}, "required"),
        ({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678",
                        "topicPerms": ["topicA"]}]}, "NAME=PERM"),
        ({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678",
                        "whiteRemoteAddress": "not.an.ip"}]}, "not.an.ip"),
        ({"globalWhiteRemoteAddresses": "10.0.0.1"}, "must be a list"),
        (["accounts"], "mapping"),
    ],
)  # fmt: skip
def test_a_bad_document_is_refused_naming_the_fault(doc: object, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        rules_from_document(doc)


def test_an_empty_file_has_no_accounts_and_the_first_definition_of_a_key_wins() -> None:
    assert rules_from_document(None).accounts == {}
    twice = rules_from_document(
        {"accounts": [
            {"accessKey": "RocketMQ", "secretKey": "first-secret"},
            {"accessKey": "RocketMQ", "secretKey": "second-secret"},
        ]}
    )  # fmt: skip
    assert twice.accounts["RocketMQ"].secret_key == "first-secret"


# ------------------------------------------------------------------ address patterns


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("", [], ["1.2.3.4"]),
        ("192.168.0.{1,2,3}", ["192.168.0.2"], ["192.168.0.4", "192.168.1.2"]),
        ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
        ("192.168.*", ["192.168.7.9"], ["192.169.0.1"]),
        ("192.168.1-9.*", ["192.168.9.1"], ["192.168.10.1"]),
        ("192.168.0.10-20", ["192.168.0.10", "192.168.0.20"], ["192.168.0.21"]),
        ("2001:db8::*", ["2001:db8::abcd"], ["2001:db9::1", "10.0.0.1"]),
        ("2001:db8::1-ff", ["2001:db8::ff"], ["2001:db8::100"]),
        ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "localhost"]),
    ],
)
def test_address_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    matcher = compile_pattern(pattern)
    assert all(matcher(a) for a in inside)
    assert not any(matcher(a) for a in outside)


@pytest.mark.parametrize("pattern", ["*.1.2.3", "192.168.0.300-301", "192.168.0.9-1", "1.2.3"])
def test_bad_address_patterns(pattern: str) -> None:
    with pytest.raises(ConfigError):
        compile_pattern(pattern)


# ------------------------------------------------------------------ the decision


def test_right_key_with_permission_is_allowed() -> None:
    assert refusal(signed(RequestCode.SEND_MESSAGE, {"topic": "topicB", "queueId": 0})) is None


def test_wrong_secret_unknown_key_and_no_key_are_refused() -> None:
    wrong = SessionCredentials("RocketMQ", "not-the-secret")
    assert refusal(signed(RequestCode.SEND_MESSAGE, {"topic": "topicB"}, creds=wrong)) == (
        "Check signature failed for accessKey=RocketMQ"
    )
    stranger = SessionCredentials("Stranger", "12345678")
    assert refusal(signed(RequestCode.SEND_MESSAGE, {"topic": "topicB"}, creds=stranger)) == (
        "No acl config for Stranger"
    )
    assert refusal(signed(RequestCode.SEND_MESSAGE, {"topic": "topicB"}, creds=None)) == (
        "No accessKey is configured"
    )


def test_a_changed_field_or_body_breaks_the_signature() -> None:
    cmd = signed(RequestCode.SEND_MESSAGE, {"topic": "topicB"}, b"body")
    cmd.body = b"other"
    assert refusal(cmd) == "Check signature failed for accessKey=RocketMQ"


def test_missing_permissions_name_the_resource_the_request_named() -> None:
    send = signed(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "topicC"})
    assert refusal(send) == "No permission for topic:topicC"
    unknown = signed(RequestCode.SEND_MESSAGE, {"topic": "NoSuchTopic"})
    # Whether the topic exists is never looked at.
    assert refusal(unknown) == "No default permission for topic:NoSuchTopic"
    pull = signed(RequestCode.PULL_MESSAGE, {"topic": "topicB", "consumerGroup": "groupA"})
    assert refusal(pull) == "No permission for group:groupA"
    pull_ok = signed(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "other"})
    assert refusal(pull_ok) is None  # defaultGroupPerm SUB


def test_admin_requests_need_an_admin_account() -> None:
    create = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "topicB"})
    assert refusal(create) == (
        f"Need admin permission for request code={int(RequestCode.UPDATE_AND_CREATE_TOPIC)}, "
        "but accessKey=RocketMQ is not"
    )
    as_admin = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, creds=ADMIN)
    assert refusal(as_admin) is None
    # An admin may also do what no permission of its own lists.
    admin_send = signed(RequestCode.SEND_MESSAGE, {"topic": "topicA"}, creds=ADMIN)
    assert refusal(admin_send) is None


def test_white_listed_addresses_need_no_signature() -> None:
    anonymous = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, creds=None)
    assert refusal(anonymous, host="10.10.103.5") is None
    wrong = SessionCredentials("rocketmq2", "not-the-secret")
    from_white = signed(RequestCode.SEND_MESSAGE, {"topic": "t"}, creds=wrong)
    assert refusal(from_white, host="192.168.1.3") is None
    assert refusal(from_white, host="172.16.0.1") == (
        "Check signature failed for accessKey=rocketmq2"
    )


def test_message_traces_may_always_be_sent() -> None:
    trace = signed(RequestCode.SEND_MESSAGE, {"topic": "RMQ_SYS_TRACE_TOPIC"})
    assert refusal(trace) is None


def test_retry_topic_sends_need_the_group() -> None:
    back = signed(RequestCode.SEND_MESSAGE, {"topic": "%RETRY%groupA", "group": "groupA"})
    assert refusal(back) == "No permission for group:groupA"
    send_back = signed(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "groupC", "offset": 1})
    assert refusal(send_back) is None


def test_heartbeat_needs_each_consumer_group_and_subscribed_topic() -> None:
    body = orjson.dumps(
        {"clientID": "c", "producerDataSet": [{"groupName": "anything"}],
         "consumerDataSet": [{"groupName": "groupC",
                              "subscriptionDataSet": [{"topic": "topicA"}]}]}
    )  # fmt: skip
    assert refusal(signed(RequestCode.HEART_BEAT, {}, body)) == "No permission for topic:topicA"
    garbled = signed(RequestCode.HEART_BEAT, {}, b"{not json")
    assert (refusal(garbled) or "").startswith("heartbeat body:")


def test_requests_without_resources_need_only_the_signature() -> None:
    route = signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicA"})
    assert refusal(route) is None


@given(
    fields=st.dictionaries(
        st.text(min_size=1).filter(lambda k: k not in ("AccessKey", "Signature")), st.text()
    ),
    body=st.binary(),
)
def test_any_request_signed_with_the_secret_passes_and_with_another_fails(
    fields: dict[str, str], body: bytes
) -> None:
    assert refusal(signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(fields), body)) is None
    other = SessionCredentials("RocketMQ", "87654321")
    bad = signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(fields), body, creds=other)
    assert refusal(bad) == "Check signature failed for accessKey=RocketMQ"


@given(
    head=st.tuples(st.integers(0, 255), st.integers(0, 255)),
    low=st.integers(0, 255),
    span=st.integers(0, 255),
    address=st.tuples(*[st.integers(0, 255)] * 4),
)
def test_ranges_match_exactly_the_addresses_with_the_head_and_a_part_in_range(
    head: tuple[int, int], low: int, span: int, address: tuple[int, int, int, int]
) -> None:
    high = min(255, low + span)
    matcher = compile_pattern(f"{head[0]}.{head[1]}.{low}-{high}.*")
    inside = address[:2] == head and low <= address[2] <= high
    assert matcher(".".join(map(str, address))) is inside
