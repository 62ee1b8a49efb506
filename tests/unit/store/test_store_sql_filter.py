"""SqlFilter in the store: every consume-queue unit passes the pre-check, only the
properties a selector names are decoded from each record (TAGS among them), and get_message
returns exactly the matching records, moving past the others."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import StoreFactory, msg, put_ok

from pocketmq.filter import compile_sql92
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.properties import decode_properties
from pocketmq.protocol.record_codec import RecordError, encode_record
from pocketmq.protocol.record_properties import RecordProperties
from pocketmq.store import GetStatus, SqlFilter


def sql(expression: str) -> SqlFilter:
    return SqlFilter(compile_sql92(expression))


@pytest.mark.parametrize(
    ("born", "store_host"),
    [(("10.0.0.1", 1), ("10.0.0.2", 2)), (("::1", 1), ("10.0.0.2", 2)), (("::1", 1), ("::2", 2))],
)
def test_record_properties_reads_the_properties_by_name(
    born: tuple[str, int], store_host: tuple[str, int]
) -> None:
    props = {"TAGS": "A", "a": "7", "KEYS": "k1 k2", "é": "ü"}
    message = MessageExt(topic="T" * 200, body=b"\x01\x02" * 50, properties=props,
                         born_host=born, store_host=store_host)  # fmt: skip
    view = RecordProperties(bytes(encode_record(message)))
    assert {name: view.get(name) for name in props} == props
    assert view.get("T") is None and view.get("") is None


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(
    st.text(alphabet=st.sampled_from("ab\x01\x02é\udcff"), max_size=30),
    st.sampled_from(["a", "b", "ab", "é", "ba"]),
)
def test_record_properties_agrees_with_decoding_the_whole_text(raw: str, name: str) -> None:
    # Duplicates, values holding a name separator, pairs without one, broken UTF-8.
    text = raw.encode("utf-8", "surrogateescape")
    record = bytes(encode_record(MessageExt(topic="T", body=b"x"), properties=text))
    whole = decode_properties(text.decode("utf-8", "replace"))
    assert RecordProperties(record).get(name) == whole.get(name)


def test_record_properties_refuses_a_record_whose_lengths_overrun_it() -> None:
    record = bytes(encode_record(MessageExt(topic="T", body=b"x", properties={"a": "1"})))
    with pytest.raises(RecordError):
        RecordProperties(record[:-3])


def test_sql_filter_evaluates_the_record_properties() -> None:
    def record(**props: str) -> bytes:
        return bytes(encode_record(MessageExt(topic="T", body=b"x", properties=props)))

    flt = sql("a > 5 AND TAGS IN ('A', 'B')")
    assert flt.is_matched_by_consume_queue(0) and flt.is_matched_by_consume_queue(-12345)
    assert flt.is_matched_by_commit_log(record(a="6", TAGS="B"))
    assert not flt.is_matched_by_commit_log(record(a="6", TAGS="C"))
    assert not flt.is_matched_by_commit_log(record(a="5", TAGS="A"))
    assert not flt.is_matched_by_commit_log(record(TAGS="A"))  # null is not TRUE
    assert not flt.is_matched_by_commit_log(record(a="six", TAGS="A"))  # Java would throw


def test_get_message_returns_exactly_the_matching_records(open_small: StoreFactory) -> None:
    store = open_small()
    for i in range(12):
        put_ok(store, msg(body=str(i).encode(), tags="even" if i % 2 == 0 else "odd",
                          properties={"n": str(i)}))  # fmt: skip
    got = store.get_message("T", 0, 0, 32, sql("n >= 4 AND TAGS = 'even'"))
    assert got.status is GetStatus.FOUND
    assert got.queue_offsets == [4, 6, 8, 10]
    assert got.next_begin_offset == 12
    got = store.get_message("T", 0, 0, 2, sql("n BETWEEN 3 AND 9"))
    assert (got.queue_offsets, got.next_begin_offset) == ([3, 4], 5)
    got = store.get_message("T", 0, 0, 32, sql("missing IS NOT NULL"))
    assert (got.status, got.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 12)
