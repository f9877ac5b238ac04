"""Turns run records into tidy tables and the papers' figures (not implemented yet)."""
