"""sync layer (see ARCHITECTURE in docs/architecture.md)."""
