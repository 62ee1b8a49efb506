"""The body of a PULL_MESSAGE answer decoded as a consumer sees it. No I/O here.

The body is the found records back to back, each as the CommitLog holds it (layout in
pocketmq.protocol.message). A consumer sees each with its body inflated, its message id the
producer's UNIQ_KEY when it has one (else the offset message id), and, when it was pulled
from a retry topic, under the topic it was first sent to (RETRY_TOPIC), as the Java client's
PullAPIWrapper.processPullResult shows them. Tag rechecks and the mapping of errors to the
client's are the client's (pocketmq.client.pull).

:func:`decode_pull_body_py` is the pure-Python reference of ``pocketmq._speedups``'s
``decode_pull_body``, which decodes a whole body in one call; :data:`decode_pull_body` is the
one bound by pocketmq.protocol.native.
"""

from __future__ import annotations

import struct
from typing import Final

from pocketmq.errors import ProtocolError
from pocketmq.protocol import native
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.record_codec import decode_message_py

_SIZE = struct.Struct(">i")


def decode_pull_body_py(body: bytes, restore_retry_topic: bool) -> list[MessageExt]:
    """The messages of a pull answer's body, in order.

    Args:
        body: the answer's body.
        restore_retry_topic: the pull was from a retry topic: a message carrying RETRY_TOPIC
            shows that topic.

    Raises:
        ProtocolError: a record's size overruns the body, or a record does not decode
            (RecordError).
        struct.error: fewer than 4 bytes are left where a record's size should be.
    """
    out = []
    view = memoryview(body)
    pos = 0
    while pos < len(body):
        size = _SIZE.unpack_from(body, pos)[0]
        if size <= 0 or pos + size > len(body):
            raise ProtocolError(f"record at byte {pos} says {size} bytes")
        msg = decode_message_py(view[pos : pos + size], inflate_body=True)
        pos += size
        msg.msg_id = msg.uniq_key or msg.msg_id
        if restore_retry_topic:
            retry_topic = msg.properties.get(MessageConst.RETRY_TOPIC)
            if retry_topic:
                msg.topic = retry_topic
        out.append(msg)
    return out


decode_pull_body: Final = native.select("decode_pull_body", decode_pull_body_py)
