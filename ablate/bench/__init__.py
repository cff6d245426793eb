"""``ablate bench``: throughput, memory and start-up measurements of every model variant.

Modules, one measurement each, all driven by :func:`ablate.bench.runner.run`:

* ``options``: :class:`~ablate.bench.options.BenchOptions`, the sizes and budgets of one run;
* ``timing``: interleaved (round-robin) repetitions, medians, torch threads;
* ``inputs``: the fixed list of real token batches and decoding sources;
* ``reference``: ``torch.nn.Transformer`` wrapped with the same embeddings, positions and output layer;
* ``training``: training tokens/s (forward, backward, optimiser step) of every variant;
* ``decoding``: greedy and beam-search sentences/s with and without the key/value cache;
* ``memory``: peak memory of chunked vs naive additive attention, in fresh subprocesses;
* ``data_stage``: first vs cached data preparation and its scale on a generated corpus;
* ``startup``: process start -> first training step of a cached ``ablate train`` trial;
* ``hardware``: measured matmul peak, model FLOPs and, on a GPU, bf16 and the SDPA backend;
* ``report``: ratios, targets, the rich tables and the JSON file;
* ``commands``: the typer command.

The GPU acceptance check (``scripts/gpu-check.sh``) is built from these parts but is no command of
the package: it lives in the checkout's ``scripts/gpu_check/`` (FLOPs and MFU, its stages, packed
sweeps, the Multi30k base-size run).

Importing this package imports neither torch nor Lightning (the subprocess entry points rely on it).
"""
