"""Models used by the workloads."""
