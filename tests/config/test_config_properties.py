"""Property-based: unknown keys and bad choices fail in one line; a valid choice round-trips."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ablate.config import ConfigError, from_flat, valid_keys

KEYS = valid_keys()


@settings(max_examples=60, deadline=None)
@given(key=st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=20).filter(lambda k: k not in KEYS))
def test_unknown_keys_fail_in_one_line(key):
    try:
        from_flat({key: 1})
    except ConfigError as err:
        assert "\n" not in str(err)
    else:  # only a prefix of a section could parse, and a section assigned a number must fail too
        raise AssertionError(f"{key!r} was accepted")


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(
        ["model.attention.score", "model.positions", "model.arch", "model.norm", "tracking.wandb", "model.rnn.cell"]
    ),
    value=st.one_of(st.text(max_size=12), st.integers(), st.floats(allow_nan=False)),
)
def test_bad_choices_fail_in_one_line_listing_the_choices(key, value):
    try:
        cfg = from_flat({key: value})
    except ConfigError as err:
        assert "\n" not in str(err) and "choose from" in str(err)
    else:  # a valid choice was drawn: it must round-trip
        section, _, name = key.rpartition(".")
        obj = cfg
        for part in section.split("."):
            obj = getattr(obj, part)
        assert str(getattr(obj, name)) == str(value)
