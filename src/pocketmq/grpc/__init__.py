"""The 5.x gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` served from the broker
process (RocketMQ's "local" proxy mode). ``v2`` holds the code generated from ``protos/``."""
