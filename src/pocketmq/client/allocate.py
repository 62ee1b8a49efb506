"""Queue allocation among the consumers of a group (AllocateMessageQueueStrategy).

Every client of a group runs the same strategy on the same sorted lists of queues and client
ids, so together they take every queue exactly once without talking to each other. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pocketmq.client.route import MessageQueue

# (consumer group, this client's id, every queue, every client id) -> this client's queues
AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def allocate_averagely(
    group: str, client_id: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely: contiguous ranges, the first ``len % n`` clients get one
    more. Every client of a group must compute the same answer, so both lists come sorted."""
    if client_id not in cid_all or not mq_all:
        return []
    index = cid_all.index(client_id)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    size = 1 if n_mq <= n_cid else n_mq // n_cid + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


def allocate_by_circle(
    group: str, client_id: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle: queue i goes to client i % n."""
    if client_id not in cid_all:
        return []
    index = cid_all.index(client_id)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]
