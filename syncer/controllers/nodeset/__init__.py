"""nodeset layer (see docs/architecture.md)."""
