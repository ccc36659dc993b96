"""Kubernetes plans, Slurm obeys: what the Kubernetes side knows about a machine (its labels, its place in
the network, its planned maintenance) carried to Slurm as node features, topology and MAINT reservations.
Each piece keeps its decision pure beside the controller that applies it; the syncer touches only what it
owns (features with its prefix, reservations named `k8s-maint-...`)."""
