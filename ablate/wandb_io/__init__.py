"""W&B as the system of record: sweep-agent configs, result artifacts, offline runs, sync.

* :mod:`~ablate.wandb_io.sweep_params`: a run started by a W&B sweep agent records its
  resolved config (W&B locks the keys the sweep sets).
* :mod:`~ablate.wandb_io.publish`: hypotheses, references (and optionally checkpoints) as
  artifacts, every ``summary.json`` field in the run summary.
* :mod:`~ablate.wandb_io.offline`: read an offline run back from its files (W&B's record log).
* :mod:`~ablate.wandb_io.sync`: ``ablate sync``, ``wandb sync`` for every trial of a sweep.
"""
