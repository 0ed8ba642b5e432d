"""Connecting to Ray: a local one, or a cluster checked before joining (``ray.init`` retries
for minutes where nothing answers); what ``ray.init`` raises is one line."""

from __future__ import annotations

import logging
import os
import signal
import socket
import warnings

import ray

from pong.run.errors import PongError, UsageError, first_line, printable
from pong.run.stops import no_sigterm_lost

__all__ = ["ClusterError", "cluster_summary", "connect", "joined", "resolve_address"]

PROBE_TIMEOUT_S = 10.0  # TCP connect to the head node
TOKEN_HELP = (
    "set RAY_AUTH_MODE=token and make the cluster's token available here (copy the head"
    " node's ~/.ray/auth_token to ~/.ray/auth_token, or set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)"
)


class ClusterError(PongError):
    """Ray could not be started or joined."""


def resolve_address(flag: str | None) -> str | None:
    """The cluster to join: ``flag`` (``--address``), else ``RAY_ADDRESS``; None: a local Ray."""
    if flag is not None and not flag.strip():
        raise UsageError("the cluster address is empty; give HOST:PORT, or none for a local Ray")
    address = flag or os.environ.get("RAY_ADDRESS") or None
    if address is not None and address.startswith(("http://", "https://")):
        source = "--address" if flag else "RAY_ADDRESS"
        raise UsageError(
            f"{source}={address} looks like the dashboard's (Ray Jobs) address, which `ray job"
            f" submit --address` takes; driver.py's {source} takes the head node's GCS address,"
            " HOST:PORT (6379 unless ray start --head set --port)"
        )
    return address


def local_ray_settings() -> None:
    """Settings for a Ray this process starts, unless the user set them: on a small machine
    every background wake-up takes a game off its core."""
    # No idle worker processes started per CPU for tasks: this program runs none.
    os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
    os.environ.setdefault("RAY_enable_metrics_collection", "0")  # for a dashboard not started


def _checked(address: str) -> str:
    """``address`` once something answers there, else ``ClusterError``; ``auto``: the cluster
    ``ray start`` last recorded here (unlike Ray's "auto", never another process's Ray)."""
    auto = address == "auto"
    if auto:
        try:
            from ray._private.utils import read_ray_address  # private
        except ImportError:
            return "auto"  # Ray resolves it in ray.init, without our early check
        address = read_ray_address()
        if not address:
            raise ClusterError(
                "--address=auto: no Ray cluster was started on this machine; start one with"
                " `ray start --head`, give HOST:PORT, or leave --address out for a local Ray"
            )
    if "://" in address:  # a form Ray resolves itself
        return address
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"cluster address must be HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as e:
        line = f"no Ray cluster answers at {printable(address)}: {e.strerror or type(e).__name__}"
        if auto:  # a head that stopped leaves its address file behind
            line += " (--address=auto: the cluster last started here with `ray start`)"
        raise ClusterError(line) from None
    return address


def _raise_for(address: str, error: BaseException) -> None:
    """What Ray raised joining ``address`` as one line (a refused token: a ConnectionError)."""
    token_mode = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
    if token_mode and "no authentication token was found" in str(error):
        raise ClusterError(f"RAY_AUTH_MODE=token is set but no token was found: {TOKEN_HELP}")
    line = f"could not join the Ray cluster at {address}: {first_line(error)}"
    if isinstance(error, ConnectionError):  # something answered there: maybe a token problem
        mine = "check that this machine's token is the head node's ~/.ray/auth_token"
        line += f"; if the cluster uses token authentication, {mine if token_mode else TOKEN_HELP}"
    raise ClusterError(line)


def connect(address: str | None, num_cpus: int | None = None, log_to_driver: bool = True) -> None:
    """Join the cluster at ``address`` (``HOST:PORT`` or ``"auto"``), or start a local Ray of
    ``num_cpus`` CPUs when it is ``None``; a ``ClusterError`` if that fails. ``log_to_driver``:
    print what Ray's worker processes print here, or leave it in their log files."""
    if address is not None and num_cpus is not None:
        raise UsageError("--num-cpus applies to a local Ray only, not with a cluster address")
    # A new local Ray turns token authentication on and says how to opt out: noise here.
    token_setup = "ray._private.authentication.authentication_token_setup"
    logging.getLogger(token_setup).setLevel(logging.ERROR)
    if address is not None:
        address = _checked(address)
    else:
        local_ray_settings()
    # How often Ray's blocking calls run Python's signal handlers: a stop takes 0.1 s, not 1.
    os.environ.setdefault("RAY_get_check_signal_interval_milliseconds", "100")
    # Ray 2.52-2.5x: a tip about GPU variables, for a program that uses no GPU.
    warnings.filterwarnings("ignore", "Tip: In future versions of Ray", FutureWarning)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        with no_sigterm_lost():
            ray.init(
                address=address or "local",  # not a cluster `ray start` left on this machine
                num_cpus=num_cpus,
                include_dashboard=False,
                logging_level=logging.WARNING,
                log_to_driver=log_to_driver,
            )
    except Exception as e:  # Ray raises a bare Exception when its new node dies
        ray.shutdown()  # ends what this ray.init had started
        if address is not None:
            _raise_for(address, e)
        raise ClusterError(f"Ray could not start here: {first_line(e)}") from None
    except (KeyboardInterrupt, SystemExit) as stop:  # stopped while Ray was starting
        ray.shutdown()
        if isinstance(stop, SystemExit):  # Ray's own SIGTERM handler, in place in ray.init
            signal.signal(signal.SIGTERM, sigterm)
            signal.raise_signal(signal.SIGTERM)  # ours again: a stop, as SIGTERM is
            raise KeyboardInterrupt from None  # where ours only counted it (a sweep starting)
        raise
    finally:
        signal.signal(signal.SIGTERM, sigterm)  # ray.init sets its own; the caller's stays


def joined(address: str | None) -> str | None:
    """The cluster this process joined (``auto`` resolved), or ``None`` for a local Ray."""
    return ray.get_runtime_context().gcs_address if address == "auto" else address


def cluster_summary(address: str | None) -> str:
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    cpus = int(ray.cluster_resources().get("CPU", 0))
    address = joined(address)
    where = f"the Ray cluster at {address}" if address else "a local Ray"
    return f"{where} ({nodes} node{'s' * (nodes != 1)}, {cpus} CPU{'s' * (cpus != 1)})"
