"""A sweep on separate hosts that share no disk: a head and a worker host (network
namespaces), the worker host in a mount namespace of its own with a private tmpfs over the
path a local ``--sweep-dir`` would use. That local directory is refused in one line; S3
storage (a moto server the test starts on the head's address) takes both hosts' trials,
stopped and resumed, with the bytes of ``driver.py``. Needs root (``ip netns``)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

from pong.run.config import Config
from pong.run.sweep import trial_name
from tests.helpers import (
    HEALTH,
    ROOT,
    ray_status_until,
    start_driver,
    token_env,
    wait_for,
)
from tests.hosts import S3_KEYS, S3_SERVER, SUBNET, Hosts, cannot_make_namespaces, sweep_hosts

pytestmark = [pytest.mark.ray, pytest.mark.cluster]

SEEDS = (1, 2)
TOY_UPDATES = 25  # toy updates: long enough to be stopped in the middle (at update 5 or so)
FLAGS = ["--env=PongToy/Catch-v0", "--batch-size=2", "--learning-rate=3e-3", "--watch-every=0"]
TOY = [*FLAGS, f"--updates={TOY_UPDATES}"]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory, shared_ray):
    """The hosts of ``tests.hosts.sweep_hosts``; the checkpoints of driver.py runs of each
    seed on one machine (the shared Ray), made while they start, to compare with."""
    reason = cannot_make_namespaces()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("sweep-hosts")
    env = {**token_env(tmp), **HEALTH, **S3_KEYS}
    address, one = shared_ray
    runs = {seed: tmp / f"alone-{seed}" for seed in SEEDS}
    drivers = [
        start_driver([*TOY, f"--seed={s}", f"--address={address}", f"--run-dir={runs[s]}"],
                     tmp / f"out-{s}.txt", one)
        for s in SEEDS
    ]  # fmt: skip
    try:
        with sweep_hosts(tmp, env) as (net, head, disk):
            ray_status_until(lambda said: "/2.0 CPU\n" in said, head, env, net.run("head"))
            for proc in drivers:
                assert proc.wait(timeout=240) == 0, proc.communicate()[1]
            alone = {s: (runs[s] / "checkpoint.safetensors").read_bytes() for s in SEEDS}
            yield net, head, env, disk, alone
    finally:
        for proc in drivers:
            proc.kill()


def _sweep(net: Hosts, *args: str) -> list[str]:
    """``python -m pong sweep ARGS`` on the head."""
    return [*net.run("head"), sys.executable, "-m", "pong", "sweep", *args]


def test_a_local_sweep_dir_the_worker_host_cannot_see_is_refused_in_one_line(hosts) -> None:
    net, address, env, disk, _ = hosts
    done = subprocess.run(
        _sweep(net, *TOY, "--seeds", "1", f"--sweep-dir={disk / 'sweep'}", f"--address={address}"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stdout, done.stderr
    assert done.stderr.startswith(
        f"python -m pong sweep: error: --sweep-dir {disk / 'sweep'}: not seen from the node at"
        f" {SUBNET}.2 (each has its own disk); give a directory every node mounts, or storage"
        " they all reach, such as s3://bucket/prefix"
    ), done.stderr
    assert not (disk / "sweep" / "sweep.json").exists()  # nothing to resume: start it again


def test_an_s3_sweep_plays_on_both_hosts_and_resumes_with_the_driver_bytes(hosts, tmp_path) -> None:
    """Two trials at once, one worker each: one on each host's CPU. Stopped with Ctrl-C and
    resumed from the bucket; each trial's checkpoint there, copied down, is the bytes of a
    driver.py run of its settings on one machine."""
    net, address, env, _, alone = hosts
    uri, out = f"s3://sweeps/toy?{S3_SERVER}", tmp_path / "out.txt"
    seeds = ["--seeds", *map(str, SEEDS)]
    proc = subprocess.Popen(
        _sweep(net, *TOY, *seeds, "--workers=1", f"--sweep-dir={uri}", f"--address={address}"),
        cwd=ROOT, env=env, stdout=open(out, "w"), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: ": update 5," in out.read_text(), proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 130, text + err
    assert f": 1 RolloutWorker each, 2 trials at once; storage {uri}" in text
    last = text.splitlines()[-1]  # the URI quoted (it has a &), the same cluster again
    assert last.endswith(f"--resume '{uri}' --address={address}"), text
    again = subprocess.run(
        _sweep(net, "--resume", uri, f"--address={address}"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[-1].startswith("Done: 2 trials in ")
    copy = tmp_path / "copy"
    down = subprocess.run(
        _sweep(net, "--download", uri, str(copy)),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert down.returncode == 0, down.stderr
    nodes = set()
    for seed in SEEDS:
        config = Config(batch_size=2, env="PongToy/Catch-v0", learning_rate=3e-3, seed=seed)
        run = copy / trial_name(config)
        assert (run / "checkpoint.safetensors").read_bytes() == alone[seed]
        updates = (run / "updates.csv").read_text().splitlines()
        assert len(updates) == 1 + TOY_UPDATES
        nodes |= {m for row in updates[1:] for m in re.findall(rf"{SUBNET}\.\d", row)}
    assert nodes == {f"{SUBNET}.1", f"{SUBNET}.2"}  # the trials played on both hosts
    assert "Traceback" not in text + err + again.stdout + again.stderr
