"""A callback named by class path in ``trainer.callbacks`` (imported by the trainer)."""

import pytorch_lightning as pl

SEEN: list[dict] = []


class Recorder(pl.Callback):
    """Records what the Trainer looked like when fitting started."""

    def __init__(self, tag: str = ""):
        self.tag = tag

    def on_fit_start(self, trainer, pl_module):
        SEEN.append({"tag": self.tag, "progress_bar": trainer.progress_bar_callback is not None})
