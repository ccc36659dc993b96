"""What every controller shares, between the controllers (syncer/controllers/*) and the edges (syncer/slurm,
syncer/kube): the binding of a Slurm node to its pod and Node, the write gate, the group commit of Slurm node
updates, the scale-in marks, and the context a controller is built from. See docs/architecture.md."""
