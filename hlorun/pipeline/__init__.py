"""Pipelines: the YAML spec and its loader, pass selection, the run loop and its
events, and the listeners that write things (dumps, reproducers, snapshots); replay of
XLA dump directories."""
