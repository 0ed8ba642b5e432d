"""Config, Options and Evaluation: each field a flag, parsed and checked the same way everywhere."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from pong.run.config import Config, Evaluation, Options, add_flags, fill, given


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for cls in (Config, Options, Evaluation):
        add_flags(parser, cls)
    return parser.parse_args(argv)


def test_absent_flags_take_the_dataclass_defaults() -> None:
    args = parse([])
    assert fill(args, Config) == Config() and fill(args, Options) == Options()
    assert given(args, Config) == {}
    assert (Config().batch_size, Config().learning_rate, Config().decay_rate) == (10, 1e-4, 0.99)


def test_given_flags_fill_their_fields_and_nothing_else() -> None:
    args = parse(["--batch-size=3", "--learning-rate", "0.01", "--redis-address=h:1", "--seed=0"])
    assert given(args, Config) == {"batch_size": 3, "learning_rate": 0.01, "seed": 0}
    assert fill(args, Config) == Config(batch_size=3, learning_rate=0.01, seed=0)
    assert fill(args, Options).address == "h:1"
    assert parse(["--address=h:2"]).address == "h:2"  # the original name and Ray's


@pytest.mark.parametrize(("flag", "field"), [("--iterations", "updates"), ("--episodes", "games")])
def test_the_older_names_of_a_flag_set_the_same_field(flag, field) -> None:
    new = "--" + field
    assert getattr(parse([f"{flag}=3"]), field) == getattr(parse([f"{new}=3"]), field) == 3


def test_every_field_is_a_flag_with_help_and_its_default() -> None:
    parser = argparse.ArgumentParser()
    for cls in (Config, Options, Evaluation):
        add_flags(parser, cls)
    text = parser.format_help().replace("\n", " ")
    for cls in (Config, Options, Evaluation):
        for f in dataclasses.fields(cls):
            flag = f.metadata["flags"][-1] if f.metadata["flags"] else "--" + f.name
            assert flag.replace("_", "-") in text
    assert "(default: 10)" in text and "(default: ALE/Pong-v5)" in text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"batch_size": True}, "batch_size: expected a positive integer, got 'True'"),
        ({"learning_rate": 0}, "learning_rate: expected a positive number, got '0'"),
        ({"learning_rate": "1e-4"}, "learning_rate: expected float, got '1e-4'"),
        ({"decay_rate": 1}, "decay_rate: expected a number below 1, got '1'"),
        ({"seed": 2.0}, "seed: expected an integer from 0 to 2**128 - 1, got '2.0'"),
    ],
)
def test_stored_values_are_checked_as_their_flags_are(values, message) -> None:
    stored = {**dataclasses.asdict(Config(seed=1)), **values}
    with pytest.raises(ValueError, match=re.escape(message)):
        Config.from_dict(stored)


def test_a_stored_config_round_trips() -> None:
    config = Config(batch_size=4, env="Pong-v0", seed=9, learning_rate=3e-4, decay_rate=0.9)
    assert Config.from_dict(dataclasses.asdict(config)) == config
    assert Config.from_dict({**dataclasses.asdict(config), "learning_rate": 1}).learning_rate == 1.0
