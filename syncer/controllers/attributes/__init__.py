"""Node labels carried to Slurm: features (`features.py`) and topology (`topology.py`), pure, applied by
`controller.AttributeController`. The syncer touches only features with its prefix."""
