"""FIFO with the official 5.x client on the shared server: a FIFO topic and a FIFO group
(consumeMessageOrderly) deliver one message group's messages in send order."""

import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer, SimpleConsumer


def test_one_customers_payments_arrive_in_order(pocketmq_session_server):
    server = pocketmq_session_server
    server.create_topic("payments", message_type="FIFO")
    server.create_group("ledger", fifo=True)
    config = ClientConfiguration(server.grpc_endpoint, Credentials())
    producer = Producer(config, ("payments",))
    producer.startup()
    for i in range(3):
        payment = Message()
        payment.topic, payment.body = "payments", f"payment-{i}".encode()
        payment.message_group = "customer-7"
        producer.send(payment)
    producer.shutdown()
    consumer = SimpleConsumer(config, "ledger", await_duration=5)
    consumer.startup()
    consumer.subscribe("payments")
    bodies = []
    deadline = time.monotonic() + 30
    while len(bodies) < 3 and time.monotonic() < deadline:
        for msg in consumer.receive(16, 30):
            bodies.append(msg.body)
            consumer.ack(msg)
    consumer.shutdown()
    assert bodies == [b"payment-0", b"payment-1", b"payment-2"]
