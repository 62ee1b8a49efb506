"""The admin library's pure parts: a route's masters and write queues (TopicRouteData), the
properties text brokers send (GET_BROKER_CONFIG), and the tag check of a message track
(DefaultMQAdminExtImpl.messageTrackDetail)."""

from __future__ import annotations

from typing import Any

from pocketmq.admin.broker_config import format_properties_text, parse_properties_text
from pocketmq.admin.msg_query import filtered_by_tags
from pocketmq.admin.send_rt import SendSample, WriteQueue, average_rt_ms, message_body, write_queues
from pocketmq.admin.topic_stats import route_masters

ROUTE: dict[str, Any] = {
    "brokerDatas": [
        {"brokerName": "b", "brokerAddrs": {"0": "10.0.0.2:10911", "1": "10.0.0.3:10911"}},
        {"brokerName": "a", "brokerAddrs": {"0": "10.0.0.1:10911"}},
        {"brokerName": "slave-only", "brokerAddrs": {"1": "10.0.0.9:10911"}},
    ],
    "queueDatas": [
        {"brokerName": "a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
        {"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
        {"brokerName": "slave-only", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
    ],
}


def test_route_masters_and_write_queues() -> None:
    assert route_masters(ROUTE) == {"a": "10.0.0.1:10911", "b": "10.0.0.2:10911"}
    assert write_queues(ROUTE) == [
        WriteQueue("a", "10.0.0.1:10911", 0),
        WriteQueue("a", "10.0.0.1:10911", 1),
        WriteQueue("b", "10.0.0.2:10911", 0),
    ]


def test_the_average_round_trip_leaves_the_warm_up_send_out() -> None:
    # CheckMsgSendRTCommand and ClusterSendMsgRTCommand divide by amount - 1, skipping send 0.
    queue = WriteQueue("a", "10.0.0.1:10911", 0)
    samples = [SendSample(queue, True, ms, "") for ms in (50.0, 2.0, 4.0)]
    assert average_rt_ms(samples) == 3.0
    assert average_rt_ms(samples[:1]) == 50.0
    assert average_rt_ms([]) == 0.0
    assert message_body(3) == b"aaa"


def test_properties_text_round_trip() -> None:
    text = "# c\nbrokerName=broker-a\n\nmessageDelayLevel=1s 5s\nnamesrvAddr=a:1;b:2\n"
    props = parse_properties_text(text)
    assert props == {"brokerName": "broker-a", "messageDelayLevel": "1s 5s",
                     "namesrvAddr": "a:1;b:2"}  # fmt: skip
    assert parse_properties_text(format_properties_text(props)) == props


def test_a_track_is_filtered_only_by_a_tag_set_without_the_tag() -> None:
    assert filtered_by_tags(["A", "B"], "C")
    assert not filtered_by_tags(["A", "B"], "A")
    # "*" and an empty set (a SQL92 subscription) take every tag.
    assert not filtered_by_tags(["*"], "C") and not filtered_by_tags([], "C")
