"""One module per workload; each registers itself with ``@register`` and is found by
`experiments.registry.discover`."""
