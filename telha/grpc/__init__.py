"""The gRPC front: ``WorkerService`` for format workers (spec 000, DESIGN.md §6)."""
