"""app layer (see docs/architecture.md)."""
