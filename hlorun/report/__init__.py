"""Presentation: the console (rich), terminal-sized output, unified diffs, the JSON
report schema, the notebook view and the HTML report."""
