"""System metrics are on by default and can be turned off."""

from ablate.config import load_config
from ablate.training import tracking


def test_system_metrics_setting_follows_the_config():
    on = load_config(None, [])
    off = load_config(None, ["tracking.system_metrics=false"])
    assert on.tracking.system_metrics is True and off.tracking.system_metrics is False
    assert tracking._settings(on.tracking.system_metrics).x_disable_stats is False
    assert tracking._settings(off.tracking.system_metrics).x_disable_stats is True
