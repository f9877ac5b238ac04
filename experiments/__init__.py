"""Training workloads, their registry and the harness that records fresh examples, steps and
wall time to a target quality (not implemented yet)."""
