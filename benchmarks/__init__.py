"""Performance benchmarks (not tests): each writes a CSV and prints a summary."""
