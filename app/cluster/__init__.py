"""Live Kafka clusters: read one as a placement request, apply a placement plan (admin clients; I/O lives here,
outside app/core)."""
