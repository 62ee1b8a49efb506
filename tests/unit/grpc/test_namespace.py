"""Resource names with a namespace, as RocketMQ's NamespaceUtil.wrapNamespace writes them."""

from __future__ import annotations

import pytest

from pocketmq.grpc.convert import wrap
from pocketmq.grpc.v2 import definition_pb2 as pb


@pytest.mark.parametrize(
    ("name", "namespace", "wrapped"),
    [
        ("T", "", "T"),
        ("T", "ns", "ns%T"),
        ("ns%T", "ns", "ns%T"),
        ("%RETRY%G", "ns", "%RETRY%ns%G"),
        ("%DLQ%ns%G", "ns", "%DLQ%ns%G"),
        ("rmq_sys_wheel_timer", "ns", "rmq_sys_wheel_timer"),
        ("TBW102", "ns", "TBW102"),
        ("", "ns", ""),
    ],
)
def test_wrap(name: str, namespace: str, wrapped: str) -> None:
    assert wrap(pb.Resource(name=name, resource_namespace=namespace)) == wrapped
