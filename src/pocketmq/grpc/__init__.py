"""The 5.x gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` served from the broker
process (RocketMQ's "local" proxy mode). ``v2`` holds the code generated from ``protos/``."""

# RocketMQ's proxy port for gRPC clients (here, not in server.py, so that the CLI can show it
# without importing grpcio).
DEFAULT_GRPC_PORT = 8081
