"""The controllers, one package each (`sync`, `nodeset`, `attributes`, `maintenance`, `partitions`, and the
scheduler's pure core in `scheduler`): a pure planning core (`plan.py`, or named for what it decides) beside
its `controller.py`. None imports another; what they share lives below them in `syncer/control`. See
docs/architecture.md."""
