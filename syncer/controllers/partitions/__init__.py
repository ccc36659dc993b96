"""SlurmPartition CRs become Slurm partitions: the pure `plan.py` and `spec.py` (the CR's spec, checked),
`slinky.py` (the partitions Slinky declares, protected; which they are: the pure `slinky_conf.py`) and
`controller.PartitionController`."""
