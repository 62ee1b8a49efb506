"""The message transforms of transactional messages (RocketMQ's TransactionalMessageBridge,
EndTransactionProcessor and TransactionalMessageUtil): a producer's message into its half,
a half into the committed message or a copy of itself, and the op record that resolves it.
No I/O here.

- **Half**: stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real topic and queue in
  ``REAL_TOPIC`` / ``REAL_QID``, the producer's UNIQ_KEY in ``__transactionId__``, and the sys
  flag's transaction type reset to NOT_TYPE (so that the half takes a queue offset in the half
  topic, where no consumer reads).
- **Copy**: each check-back (and each pass of a half still inside its immunity time) puts the
  half back at the end of the half queue, with ``TRANSACTION_CHECK_TIMES`` counted, so that the
  count is durable and the check's progress can move past the old one. pocketmq marks every
  copy with ``TRAN_PREPARED_QUEUE_OFFSET`` = the queue offset of the first half (RocketMQ marks
  the immunity copies so): that offset is the transaction's identity, which every end of any
  copy resolves at once.
- **Commit**: the real topic and queue back, the producer's properties without REAL_TOPIC,
  REAL_QID and TRAN_MSG (its WAIT too is the producer's), the sys flag's type COMMIT and the
  half's CommitLog offset as prepared transaction offset, as ``endMessageTransaction`` leaves
  them.
- **Op**: topic ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the half's queue id, tag ``d``, body the
  queue offsets of the halves it resolves (the half named, its latest copy, the first half),
  each followed by ``,`` as RocketMQ 5 writes (and reads) op bodies.
"""

from __future__ import annotations

from collections.abc import Iterable

from pocketmq.protocol.message import Host, MessageConst, MessageExt, SysFlag, delay_level
from pocketmq.protocol.names import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

# TransactionalMessageUtil.REMOVE_TAG and OFFSET_SEPARATOR.
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","
# Properties a half carries for the broker only; a commit drops them.
_HALF_ONLY = (
    MessageConst.REAL_TOPIC,
    MessageConst.REAL_QUEUE_ID,
    MessageConst.TRANSACTION_PREPARED,
)


def with_transaction_type(sys_flag: int, kind: int) -> int:
    """MessageSysFlag.resetTransactionValue."""
    return (sys_flag & ~SysFlag.TRANSACTION_ROLLBACK_TYPE) | kind


def is_half(msg: MessageExt) -> bool:
    """Whether a producer's message opens a transaction: TRAN_MSG is "true" (Java's
    parseBoolean) or the sys flag says PREPARED, except the retries of clients before 4.6.1,
    which kept TRAN_MSG on a message sent back with a delay level (SendMessageProcessor)."""
    prepared = (
        _tran_msg(msg)
        or SysFlag.transaction_value(msg.sys_flag) == SysFlag.TRANSACTION_PREPARED_TYPE
    )
    old_retry = msg.reconsume_times > 0 and delay_level(msg.properties) > 0
    return prepared and not old_retry


def is_plain(msg: MessageExt) -> bool:
    """Whether a message that is not a half carries no transaction type in its sys flag (a
    batch must not: CommitLog.asyncPutMessages)."""
    plain_flag = SysFlag.transaction_value(msg.sys_flag) == SysFlag.TRANSACTION_NOT_TYPE
    return plain_flag and not _tran_msg(msg)


def all_plain(msgs: list[MessageExt]) -> bool:
    """``is_plain`` of every message of a batch, in one pass: the full test runs only for a
    message with a transaction bit or a TRAN_MSG property (a batch of 256 pays a few
    microseconds, not a call per message)."""
    bits = SysFlag.TRANSACTION_ROLLBACK_TYPE
    prepared = MessageConst.TRANSACTION_PREPARED
    for msg in msgs:
        if msg.sys_flag & bits or (prepared in msg.properties and not is_plain(msg)):
            return False
    return True


def _tran_msg(msg: MessageExt) -> bool:
    return msg.properties.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true"


def make_visible(msg: MessageExt) -> None:
    """Clear a PREPARED or ROLLBACK type from a message that is not a half (an old client's
    transactional retry): stored with it, the message would never reach a queue."""
    kind = SysFlag.transaction_value(msg.sys_flag)
    if kind in (SysFlag.TRANSACTION_PREPARED_TYPE, SysFlag.TRANSACTION_ROLLBACK_TYPE):
        msg.sys_flag = with_transaction_type(msg.sys_flag, SysFlag.TRANSACTION_NOT_TYPE)


def half_of(msg: MessageExt) -> MessageExt:
    """The half to store for a producer's transactional message (parseHalfMessageInner);
    ``msg`` is changed in place and returned."""
    props = msg.properties
    # The broker's own marks: a producer's copy of them (a consumed message sent again) would
    # make this half pass for another transaction, or for one checked many times already.
    props.pop(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, None)
    props.pop(MessageConst.TRANSACTION_CHECK_TIMES, None)
    if msg.uniq_key:
        props[MessageConst.TRANSACTION_ID] = msg.uniq_key
    props[MessageConst.REAL_TOPIC] = msg.topic
    props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
    msg.sys_flag = with_transaction_type(msg.sys_flag, SysFlag.TRANSACTION_NOT_TYPE)
    msg.topic = TRANS_HALF_TOPIC
    msg.queue_id = 0
    return msg


def first_half_offset(half: MessageExt) -> int:
    """The queue offset of the first half of a transaction, from a half or any copy of it."""
    mark = half.properties.get(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET)
    if mark is not None:
        try:
            return int(mark)
        except ValueError:
            pass
    return half.queue_offset


def check_times(half: MessageExt) -> int | None:
    """How many times the half was checked (TRANSACTION_CHECK_TIMES; None: never)."""
    value = half.properties.get(MessageConst.TRANSACTION_CHECK_TIMES)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return 0


def immunity_ms(half: MessageExt, transaction_timeout_ms: int) -> int | None:
    """How long after its birth the half is left unchecked when it asks for it
    (CHECK_IMMUNITY_TIME_IN_SECONDS, never less than the transaction timeout:
    TransactionalMessageUtil.getImmunityTime); None when it does not ask."""
    value = half.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
    if value is None:
        return None
    try:
        asked = int(value) * 1000
    except ValueError:
        asked = 0
    return max(asked, transaction_timeout_ms)


def copy_of(half: MessageExt, *, checked: int | None) -> MessageExt:
    """A half to put back at the end of the half queue (renewHalfMessageInner), marked with
    its first half's offset, its check count set when ``checked`` is not None."""
    props = dict(half.properties)
    props[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(first_half_offset(half))
    if checked is not None:
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(checked)
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    copy = half.put_again(TRANS_HALF_TOPIC, half.queue_id, props, half.reconsume_times)
    return copy


def real_topic(half: MessageExt) -> str:
    return half.properties.get(MessageConst.REAL_TOPIC, "")


def real_queue_id(half: MessageExt) -> int:
    try:
        return int(half.properties.get(MessageConst.REAL_QUEUE_ID, "0"))
    except ValueError:
        return 0


def as_sent(half: MessageExt) -> MessageExt:
    """The half as a producer's check listener sees it: its real topic and queue back, the
    broker's fields (offsets, ids) kept (sendCheckMessage)."""
    seen = half.put_again(real_topic(half), real_queue_id(half), dict(half.properties),
                          half.reconsume_times)  # fmt: skip
    seen.prepared_transaction_offset = half.prepared_transaction_offset
    seen.store_timestamp = half.store_timestamp
    seen.queue_offset = half.queue_offset
    seen.phy_offset = half.phy_offset
    seen.body_crc = half.body_crc
    seen.msg_id = half.msg_id
    return seen


def committed(half: MessageExt, store_host: Host) -> MessageExt:
    """The message a commit makes visible (endMessageTransaction)."""
    props = {k: v for k, v in half.properties.items() if k not in _HALF_ONLY}
    msg = half.put_again(real_topic(half), real_queue_id(half), props, half.reconsume_times)
    msg.sys_flag = with_transaction_type(half.sys_flag, SysFlag.TRANSACTION_COMMIT_TYPE)
    msg.prepared_transaction_offset = half.phy_offset
    msg.store_host = store_host
    return msg


def op_body(offsets: Iterable[int]) -> bytes:
    """The half queue offsets an op resolves, each followed by the separator."""
    return "".join(f"{o}{OFFSET_SEPARATOR}" for o in dict.fromkeys(offsets)).encode()


def parse_op_body(body: bytes) -> list[int]:
    """The half offsets an op record resolves ("12," or a batch "12,13,"; RocketMQ 4 wrote
    "12"); what is not a number is skipped, as RocketMQ logs and skips it."""
    out = []
    for part in body.decode("utf-8", "replace").split(OFFSET_SEPARATOR):
        try:
            out.append(int(part))
        except ValueError:
            continue
    return out


def op_message(offsets: Iterable[int], queue_id: int, store_host: Host, now_ms: int) -> MessageExt:
    """The op record resolving the halves at ``offsets`` of half queue ``queue_id``
    (deletePrepareMessage, makeOpMessageInner)."""
    return MessageExt(
        topic=TRANS_OP_HALF_TOPIC,
        body=op_body(offsets),
        queue_id=queue_id,
        properties={MessageConst.TAGS: REMOVE_TAG, MessageConst.WAIT_STORE_MSG_OK: "false"},
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


def checked_too_often(half: MessageExt) -> MessageExt:
    """The copy of a half given up on, kept in TRANS_CHECK_MAX_TIME_TOPIC
    (DefaultTransactionalMessageCheckListener.toMessageExtBrokerInner)."""
    props = dict(half.properties)
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return half.put_again(TRANS_CHECK_MAX_TIME_TOPIC, 0, props, half.reconsume_times)
