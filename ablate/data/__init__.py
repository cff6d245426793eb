"""The data pipeline: corpus sources -> BPE tokenizer -> cached Arrow encodings -> token batches (one module each:
``sources``, ``tokenizer``, ``cache``, ``datamodule``; ``builtin`` is the synthetic task). User mistakes raise
:class:`~ablate.data.sources.DataError` with one actionable line."""
