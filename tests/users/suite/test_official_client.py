from rocketmq import ClientConfiguration, Credentials, Message, Producer, SimpleConsumer


def test_order_reaches_billing(pocketmq_server):
    pocketmq_server.create_topic("orders")
    config = ClientConfiguration(pocketmq_server.grpc_endpoint, Credentials())
    producer = Producer(config, ("orders",))
    producer.startup()
    order = Message()
    order.topic, order.body, order.tag = "orders", b"order-1", "created"
    producer.send(order)
    producer.shutdown()
    consumer = SimpleConsumer(config, "billing", await_duration=5)
    consumer.startup()
    consumer.subscribe("orders")
    received = consumer.receive(16, 30)
    consumer.ack(received[0])
    consumer.shutdown()
    assert [(m.body, m.tag) for m in received] == [(b"order-1", "created")]
