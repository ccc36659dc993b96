"""The controllers, one package each: a pure planning core (`plan.py`, or named for what it decides) beside
its `controller.py`, which holds the controller and its `REGISTRATION` (syncer/control/registration.py).
None imports another; what they share lives below them in `syncer/control`. See docs/architecture.md.

The registry: one line per controller, its folder's name, in the order the service builds and starts them.
`scheduler` is the one-pool scheduler (docs/scheduler.md), off unless --scheduler-name is set.
"""

CONTROLLERS = (
    "sync",
    "attributes",
    "nodeset",
    "maintenance",
    "partitions",
    "scheduler",
)
