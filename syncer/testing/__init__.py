"""testing layer (see ARCHITECTURE in docs/architecture.md)."""
