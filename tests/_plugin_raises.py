"""A plug-in module with a bug: importing it raises."""

raise RuntimeError("plug-in bug at import")
