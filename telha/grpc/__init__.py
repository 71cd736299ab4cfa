"""The gRPC front: ``WorkerService`` for format workers (docs/worker-protocol.md)."""
