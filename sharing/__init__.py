"""Shared data loading: one producer process serves the batches of one input pipeline to
several training processes (the `Producer`/`Consumer` API is specified in DESIGN's
"sharing/" section; not implemented yet)."""
