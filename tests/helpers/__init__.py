"""What the tests share, imported as ``from tests.helpers.<module> import ...`` (never copied into a test).

``tiny``           the tiny training run every end-to-end test starts from (overrides and sweep parameters)
``model``          tiny Lightning-free models and batches for the model tests
``corpus``         small parallel-corpus folders written from lines or slices of Multi30k
``cli``            ``cli.py`` in a subprocess, as a user runs it, or the same command line in this process
``records``        constructed sweep folders (trial records, hypotheses) and a W&B public-API stand-in
``marks``          a table's Δ, CI and † per cell beside what the figures draw, and a spy on the figures
``sweep``          sweep specs, quiet launcher options and the fake trainer's event log
``fake_trainer``   a script that behaves like ``ablate train`` without training (run by path)
``slurm_cluster``  a real one-node SLURM cluster for the SLURM tests
``wandb_agent``    W&B's sweep agent emulated: proposals, parameter file, environment, command line
``wandb_offline``  ``offline_api``: reading offline W&B run files back
``wandb_start``    ``log_trials``: scripts that start offline W&B runs (run by path)
``callbacks``      a Lightning callback named by class path in ``trainer.callbacks``

``tests/conftest.py`` puts the checkout first on ``sys.path``, so ``tests.helpers`` is importable in every
test; a script started in a subprocess gets the same with ``PYTHONPATH`` set to the checkout.
"""
