"""SlurmPartition CRs become Slurm partitions: the pure `plan.py` and `spec.py` (the CR's spec, checked),
`slinky.py` (the partitions Slinky declares, protected) and `controller.PartitionController`."""
