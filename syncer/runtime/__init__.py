"""The controller runtime: a supervised Manager for every long-running loop, the Controller
contract (`reconcile(key) -> Result`) with one handler for retries, requeues and metrics, the keyed
work queue, and the one backoff policy. Generic: it imports neither Slurm nor Kubernetes code.
See docs/architecture.md."""
