"""The controller runtime: a supervised Manager for every long-running loop, the Controller
contract (`keys()`, `reconcile(key) -> Result`) with one runner (`ControllerRunner.serve`: the one run
loop, resync included) for retries, requeues, metrics and log context, the error vocabulary
(`errors.py`), the keyed work queue, and the one backoff policy. Generic: it imports neither Slurm nor
Kubernetes code (the write gate is a protocol here). See docs/architecture.md."""
