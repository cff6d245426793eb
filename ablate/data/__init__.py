"""The data pipeline: corpus sources -> BPE tokenizer -> cached Arrow encodings -> token batches.

Modules, in the order data flows through them:

* ``corpus`` / ``sources``: the :class:`~ablate.data.sources.Corpus` every source produces and
  the source registry (``local`` folder, ``hf`` hub dataset, ``builtin`` synthetic task, whose
  grammar lives in ``builtin``);
* ``tokenizer``: :class:`~ablate.data.tokenizer.SubwordTokenizer` (BPE, pad/bos/eos/unk = 0/1/2/3);
* ``cache`` / ``encoded``: locked, atomic on-disk cache and :func:`~ablate.data.cache.prepare`;
* ``batching``: :class:`~ablate.data.datamodule.TokenBatchSampler` and evaluation batches;
* ``datamodule``: :class:`~ablate.data.datamodule.TranslationDataModule` (Lightning).

User mistakes raise :class:`~ablate.data.sources.DataError` with one actionable line.
"""
