"""send_header of the C extension against its pure-Python reference: the same tuple (every
item of the same type) for every header, the same exception with the same message for bad
ones. Headers are drawn as producers write them (V1 and V2 names, the values real clients
send) and then broken: numbers out of their fields' domains, past 64 bits, with signs, spaces,
underscores or other digits, topics of every character and length, batch flags in any case,
non-str values, fields named twice, odd defaults. Skipped when the extension is not built.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native_decode import outcome

from pocketmq.protocol.send_header import V2_NAMES, send_header_py

speedups = pytest.importorskip("pocketmq._speedups")

V1_OF = {v: k for k, v in V2_NAMES.items()}
NUMBER_TEXT = st.one_of(
    st.integers(-3, 3).map(str),
    st.integers(-(2**31) - 2, 2**31 + 1).map(str),
    st.integers(-(2**63) - 2, 2**63 + 1).map(str),
    st.integers(0, 253_402_300_799_999 + 2).map(str),
    st.integers(-(10**25), 10**25).map(str),
    st.sampled_from(["", "-", "+1", " 1", "1 ", "1_0", "٣", "0x1", "1.5", "1e3", "007", "-0",
                     "nan", "inf", "true", "1024", "1025", "0"]),
)  # fmt: skip
TOPIC_TEXT = st.one_of(
    st.from_regex(r"[%|a-zA-Z0-9_-]{1,130}", fullmatch=True),
    st.sampled_from(["", " ", "TopicTest", "%RETRY%g", "%DLQ%g" + "x" * 200, "a b", "é", "TBW102"]),
    st.text(max_size=8),
)  # fmt: skip
TEXT = st.text(max_size=12)
VALUES: dict[str, Any] = {
    "producerGroup": TEXT,
    "topic": TOPIC_TEXT,
    "defaultTopic": st.one_of(st.just("TBW102"), TEXT),
    "defaultTopicQueueNums": NUMBER_TEXT,
    "queueId": NUMBER_TEXT,
    "sysFlag": NUMBER_TEXT,
    "bornTimestamp": NUMBER_TEXT,
    "flag": NUMBER_TEXT,
    "properties": st.one_of(st.just("TAGS\x01a\x02UNIQ_KEY\x01K\x02"), TEXT),
    "reconsumeTimes": NUMBER_TEXT,
    "unitMode": st.sampled_from(["false", "true"]),
    "maxReconsumeTimes": NUMBER_TEXT,
    "batch": st.sampled_from(["", "false", "true", "TRUE", " true", "False", "yes"]),
    "brokerName": TEXT,
}
ODD_VALUE = st.one_of(st.none(), st.integers(-5, 5), st.booleans(), st.binary(max_size=3))


@st.composite
def headers(draw: st.DrawFn) -> tuple[dict[Any, Any], bool]:
    v2 = draw(st.booleans())
    names = draw(st.lists(st.sampled_from(sorted(VALUES)), unique=True))
    if draw(st.booleans()):  # as producers send them: the topic always
        names.append("topic") if "topic" not in names else None
    ext: dict[Any, Any] = {}
    for name in names:
        value = draw(st.one_of(VALUES[name], ODD_VALUE) if draw(st.integers(0, 9)) == 0
                     else VALUES[name])  # fmt: skip
        ext[V1_OF[name] if v2 else name] = value
        if v2 and draw(st.integers(0, 19)) == 0:
            ext[name] = draw(VALUES[name])  # the field again under its V1 name
    if draw(st.integers(0, 9)) == 0:
        ext[draw(TEXT)] = draw(st.one_of(TEXT, ODD_VALUE))
    return ext, v2


DEFAULT_QUEUE_NUMS = st.one_of(st.just(4), st.integers(-2, 1026), st.integers(-(2**40), 2**40))


@given(headers(), DEFAULT_QUEUE_NUMS)
def test_send_header_matches_its_reference(header: tuple[dict[Any, Any], bool], qn: int) -> None:
    ext, v2 = header
    native = outcome(speedups.send_header, ext, v2, qn)
    assert native == outcome(send_header_py, ext, v2, qn)


@given(headers())
def test_arguments_off_the_fast_path_go_to_the_reference(
    header: tuple[dict[Any, Any], bool],
) -> None:
    ext, v2 = header
    for args in ((ext, int(v2), 4), (ext, v2, True), (list(ext.items()), v2, 4)):
        assert outcome(speedups.send_header, *args) == outcome(send_header_py, *args)


def test_a_producers_v2_header() -> None:
    ext = {"a": "P", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "2", "f": "0",
           "g": "1795567224818", "h": "0", "i": "TAGS\x01bench\x02", "j": "0", "k": "false",
           "m": "false"}  # fmt: skip
    expected = ("BenchTopic", "TBW102", 4, 2, 0, "TAGS\x01bench\x02", 0, 1795567224818, 0, -1,
                False)  # fmt: skip
    assert speedups.send_header(ext, True, 8) == expected == send_header_py(ext, True, 8)
