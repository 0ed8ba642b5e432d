from __future__ import annotations

import numpy as np
import pytest

from pong.run.checkpoint import FILENAME, load, save
from pong.tools.export import main
from tests.run.test_checkpoint import make_checkpoint


def test_export_writes_a_policy_file_and_says_so(tmp_path, capsys) -> None:
    save(tmp_path / FILENAME, make_checkpoint())
    assert main([str(tmp_path), str(tmp_path / "agent.safetensors")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Wrote {tmp_path / 'agent.safetensors'} (")
    assert "policy of update 7, 70 games, running mean -20.43" in out
    policy = load(tmp_path / "agent.safetensors", policy=True)
    np.testing.assert_allclose(policy.weights["W1"], load(tmp_path).weights["W1"], rtol=6e-8)


def test_a_checkpoint_beyond_float32_is_one_line_and_no_policy(tmp_path, capsys) -> None:
    bad = make_checkpoint()
    bad.weights["W2"][0] = 1e308  # finite here, inf as float32
    save(tmp_path / FILENAME, bad)
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), str(tmp_path / "a.safetensors")])
    err = capsys.readouterr().err.splitlines()
    assert (exit_info.value.code, len(err)) == (2, 1)  # no overflow warning before it
    assert "W2 holds values beyond 3.4e+38" in err[0]
    assert not (tmp_path / "a.safetensors").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["{tmp}/nowhere", "{tmp}/a.safetensors"],
            "argument checkpoint: {tmp}/nowhere/checkpoint.safetensors: no such",
        ),
        (["{tmp}", "{tmp}/a.gif"], "argument output: must end in .safetensors"),
        (["{tmp}", ""], "argument output: expected a path, got ''"),  # not '.
        (["{tmp}", "{tmp}/no/a.safetensors"], "argument output: no such directory {tmp}/no"),
        (
            ["{tmp}", "{tmp}/checkpoint.safetensors"],
            "argument output: {tmp}/checkpoint.safetensors exists",
        ),
    ],
)
def test_bad_arguments_are_one_line(argv, message, tmp_path, capsys) -> None:
    (tmp_path / "nowhere").mkdir()
    save(tmp_path / FILENAME, make_checkpoint())
    with pytest.raises(SystemExit) as exit_info:
        main([a.format(tmp=tmp_path) for a in argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1  # one line, no usage line before it
    assert err[0].startswith(f"python -m pong export: error: {message.format(tmp=tmp_path)}")
    usage = "must end" in message or "expected a path" in message  # where --help can help
    assert ("see --help" in err[0]) == usage
    assert not (tmp_path / "a.safetensors").exists()
    assert load(tmp_path).rmsprop_cache is not None  # the run's checkpoint is still whole
