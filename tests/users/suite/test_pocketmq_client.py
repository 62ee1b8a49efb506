import pytest

from pocketmq.client import LitePullConsumer, Producer, message


@pytest.mark.asyncio
async def test_order_reaches_billing(pocketmq_server):
    async with Producer("shop", pocketmq_server.namesrv_addr) as producer:
        await producer.send(message("orders", b"order-1", tags="created"))
    consumer = LitePullConsumer("billing", pocketmq_server.namesrv_addr)
    consumer.subscribe("orders", "created")
    async with consumer:
        received = await consumer.poll(timeout_s=10)
    assert [(m.body, m.tags) for m in received] == [(b"order-1", "created")]
