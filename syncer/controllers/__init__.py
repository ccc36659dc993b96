"""The controllers, one package each: a pure planning core (`plan.py`, or named for what it decides) beside
its `controller.py`, which holds the controller and its `REGISTRATION` (syncer/control/registration.py).
None imports another; what they share lives below them in `syncer/control`. See docs/architecture.md.

The registry: one line per controller, its folder's name, in the order the service builds and starts them.
`scheduler` holds the scheduler's pure core so far (docs/scheduler.md): it joins the registry with its
controller.
"""

CONTROLLERS = (
    "sync",
    "attributes",
    "nodeset",
    "maintenance",
    "partitions",
)
