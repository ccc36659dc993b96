"""Maintenance windows announced on Nodes become Slurm MAINT reservations: the pure `plan.py` (windows
wanted, reservations present -> create/update/delete) and `controller.MaintenanceController`."""
