"""Types of the C extension built from src/pocketmq/_native (see pocketmq.protocol.native)."""

import mmap
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pocketmq.protocol.message import Host, Message, MessageExt, ReadableBuffer
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.protocol.send_header import SendHeader
from pocketmq.store.commitlog import PutArgs
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.index_insert import IndexedRecord
from pocketmq.store.pull_scan import pull_scan_py
from pocketmq.store.put_one import Segment

# The pure-Python references by function name: input off the native fast path goes to them.
REFERENCES: dict[str, Callable[..., object]]

def java_string_hash(s: str) -> int: ...
def java_string_hash_concat(prefix_hash: int, s: str) -> int: ...
def encode_properties(properties: dict[str, str]) -> str: ...
def decode_properties(text: str) -> dict[str, str]: ...
def encode_records(
    msgs: list[MessageExt],
    store_host: bytes,
    hosts: dict[Host, bytes],
    max_body_size: int,
    max_record_size: int,
) -> tuple[bytes, list[int], list[int]]: ...
def place_records(
    buf: bytearray | memoryview | mmap.mmap,
    pos: int,
    data: bytes,
    phy_offset: int,
    store_timestamp: int,
    queue_offsets: list[int],
) -> None: ...
def put_one(
    msg: MessageExt,
    mf: Segment,
    put_args: PutArgs,
    cq: ConsumeQueue | None,
    store_ts: int,
) -> tuple[DispatchRequest, int] | None: ...
def put_record(
    buf: bytearray | memoryview | mmap.mmap,
    pos: int,
    limit: int,
    msg: MessageExt,
    store_host: bytes,
    born_hosts: dict[Host, bytes],
    max_body_size: int,
    max_record_size: int,
    phy_offset: int,
    store_timestamp: int,
    queue_table: dict[tuple[str, int], int],
    delay_levels_ms: tuple[int, ...],
) -> DispatchRequest | None: ...
def encode_batch_body(messages: Sequence[Message]) -> bytes: ...
def decode_batch_body(data: bytes) -> list[tuple[int, bytes, dict[str, str]]]: ...
def batch_messages(base: MessageExt, body: bytes) -> list[MessageExt]: ...
def offset_msg_ids_text(host: bytes, phy_offsets: list[int]) -> str: ...
def dispatch_requests(
    msgs: Sequence[MessageExt],
    sizes: Sequence[int],
    sys_flags: Sequence[int],
    queue_offsets: Sequence[int],
    phy_offset: int,
    store_timestamp: int,
    delay_levels_ms: tuple[int, ...],
) -> list[DispatchRequest]: ...
def consume_queue_put_requests(
    mm: mmap.mmap | bytearray,
    pos: int,
    limit: int,
    file_from: int,
    topic: str,
    queue_id: int,
    reqs: Sequence[DispatchRequest],
    start: int,
) -> tuple[int, int, int]: ...
def decode_message(
    buf: bytes | bytearray | memoryview | mmap.mmap,
    pos: int = 0,
    check_crc: bool = False,
    *,
    inflate_body: bool = False,
) -> MessageExt: ...
def decode_pull_body(body: bytes, restore_retry_topic: bool) -> list[MessageExt]: ...
def add_record(
    columns: list[list[Any]],
    include_properties: bool,
    store_columns: bool,
    buf: ReadableBuffer,
    pos: int,
    limit: int,
    topic: str | None,
    broker: str | None,
) -> tuple[int, int, int]: ...
def index_put_requests(
    mm: mmap.mmap | bytearray,
    slot_pages: bytearray,
    reserved: int,
    slot_num: int,
    index_num: int,
    reqs: Sequence[IndexedRecord],
    start: int,
) -> int: ...
def decode_frame(frame: bytes | memoryview) -> RemotingCommand: ...
def next_frame(buf: bytearray, pos: int, max_frame: int) -> tuple[RemotingCommand, int] | None: ...
def encode_frame_head(cmd: RemotingCommand) -> bytes: ...
def send_header(ext_fields: dict[str, str], v2: bool, default_queue_nums: int) -> SendHeader: ...
def hold_messages(held: dict[int, MessageExt], msgs: Iterable[MessageExt]) -> tuple[int, int]: ...
def release_messages(held: dict[int, MessageExt], msgs: Iterable[MessageExt]) -> int: ...

pull_scan = pull_scan_py
