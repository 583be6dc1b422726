"""Two ``troupe run`` replicas with leader election, started, killed, paused and restarted.

``Replicas`` starts each replica as ``python -m troupe run`` (as
tests/integration/test_leader_election.py does) with a profile that elects a leader on
a short Lease and slows the client down (``clientConnection.qps``), so a gang takes
long enough to bind that a replica can be killed in the middle of it. Each start of a
replica (an incarnation) logs to its own file in the work directory.

``supervise`` plays the kubelet: a replica that exits (killed by the harness, or
exiting 1 because it lost its Lease) is started again a second later under the same
``POD_NAME``, with a fresh lease identity, as a restarted container would be.
``leader`` names the live incarnation holding the Lease, read from the cluster;
``closures`` what each incarnation logged when its write fence closed (``lease.Closure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from troupe.sim.apiserver.storage.store import Store

from bench.chaos.lease import Closure
from bench.chaos.plan import Settings

RESTART_DELAY = 1.0


def profile_text(settings: Settings) -> str:
    lease = settings.lease
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: {settings.qps}
  burst: {settings.burst}
leaderElection:
  leaderElect: true
  leaseDuration: {lease.duration}s
  renewDeadline: {lease.renew_deadline}s
  retryPeriod: {lease.retry_period}s
  resourceName: {lease.name}
  resourceNamespace: {lease.namespace}
"""


@dataclass
class Incarnation:
    """One process of a replica, and what its log has said so far."""

    proc: asyncio.subprocess.Process
    log: Path
    identity: str = ""
    scheduling: bool = False
    closure: Closure | None = None
    _offset: int = 0

    def scan(self) -> None:
        """Read the log lines written since the last scan."""
        try:
            with self.log.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if not self.identity and entry.get("identity"):
                self.identity = str(entry["identity"])
            if entry.get("msg") == "caches synced, scheduling":
                self.scheduling = True
            if self.closure is None:
                self.closure = Closure.of(entry)


@dataclass
class Replica:
    name: str
    current: Incarnation | None = None
    paused: bool = False
    starts: int = 0
    exit_codes: Counter[int] = field(default_factory=Counter)
    incarnations: list[Incarnation] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.current is not None and self.current.proc.returncode is None


class Replicas:
    def __init__(self, settings: Settings, kubeconfig: Path, workdir: Path, store: Store) -> None:
        self.settings = settings
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.store = store
        self.profile = workdir / "profile.yaml"
        self.profile.write_text(profile_text(settings))
        self.replicas = [Replica("a"), Replica("b")]
        self.restarts = 0

    async def start(self, replica: Replica) -> None:
        replica.starts += 1
        log = self.workdir / f"{replica.name}.{replica.starts}.log"
        # Logs to files: nobody drains a pipe of a process that is about to be killed.
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "troupe",
                "run",
                "--config",
                str(self.profile),
                "--kubeconfig",
                str(self.kubeconfig),
                "--log-level",
                "info",
                "--shutdown-grace",
                "1",
                "--bind-address",
                "127.0.0.1",
                "--port",
                "0",
                stdout=out,
                stderr=out,
                env={**os.environ, "POD_NAME": replica.name},
            )
        replica.current = Incarnation(proc, log)
        replica.incarnations.append(replica.current)

    async def start_all(self) -> None:
        for replica in self.replicas:
            await self.start(replica)

    async def supervise(self) -> None:
        """Restart every replica that exited, a second after it did, until cancelled."""
        exited_at: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        while True:
            for replica in self.replicas:
                current = replica.current
                if current is None or current.proc.returncode is None:
                    continue
                if replica.name not in exited_at:
                    exited_at[replica.name] = loop.time()
                    replica.exit_codes[current.proc.returncode] += 1
                elif loop.time() - exited_at[replica.name] >= RESTART_DELAY:
                    del exited_at[replica.name]
                    self.restarts += 1
                    await self.start(replica)
            await asyncio.sleep(0.1)

    def holder(self) -> str:
        lease = self.settings.lease
        rt = self.store.resolve("leases.coordination.k8s.io")
        obj = self.store.find(rt, lease.namespace, lease.name)
        return str(((obj or {}).get("spec") or {}).get("holderIdentity") or "")

    def leader(self) -> Replica | None:
        """The live, unpaused replica whose current incarnation holds the Lease and
        has synced its caches (it schedules)."""
        holder = self.holder()
        for replica in self.replicas:
            current = replica.current
            if current is None or not replica.alive or replica.paused:
                continue
            current.scan()
            if current.identity == holder and current.scheduling:
                return replica
        return None

    def other(self, replica: Replica) -> Replica:
        return next(r for r in self.replicas if r is not replica)

    async def identity_of(self, replica: Replica, timeout: float) -> str:
        """The lease identity of the replica's live incarnation, once it has logged it
        ("" if it did not within ``timeout``)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            current = replica.current
            if current is not None and replica.alive:
                current.scan()
                if current.identity:
                    return current.identity
            await asyncio.sleep(0.05)
        return ""

    def closures(self) -> dict[str, Closure]:
        """Each incarnation's fence closure, by lease identity, as logged so far."""
        found: dict[str, Closure] = {}
        for replica in self.replicas:
            for incarnation in replica.incarnations:
                incarnation.scan()
                if incarnation.identity and incarnation.closure is not None:
                    found[incarnation.identity] = incarnation.closure
        return found

    async def wait_for_leader(self, timeout: float) -> Replica | None:
        deadline = asyncio.get_running_loop().time() + timeout
        while (leader := self.leader()) is None:
            if asyncio.get_running_loop().time() > deadline:
                return None
            await asyncio.sleep(0.05)
        return leader

    def kill(self, replica: Replica) -> None:
        if replica.current is not None and replica.alive:
            replica.current.proc.send_signal(signal.SIGKILL)

    def pause(self, replica: Replica) -> None:
        if replica.current is not None and replica.alive:
            replica.paused = True
            replica.current.proc.send_signal(signal.SIGSTOP)

    def resume(self, replica: Replica) -> None:
        if replica.current is not None and replica.paused:
            replica.paused = False
            with contextlib.suppress(ProcessLookupError):
                replica.current.proc.send_signal(signal.SIGCONT)

    async def wait_exit(self, replica: Replica, timeout: float) -> int | None:
        """The exit code of the replica's current incarnation, or None if it still runs."""
        if replica.current is None:
            return None
        try:
            return await asyncio.wait_for(replica.current.proc.wait(), timeout)
        except TimeoutError:
            return None

    async def stop_all(self) -> None:
        """SIGTERM every live replica (SIGCONT first if paused); SIGKILL after 15 s."""
        for replica in self.replicas:
            self.resume(replica)
            if replica.current is not None and replica.alive:
                replica.current.proc.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            if replica.current is None:
                continue
            proc = replica.current.proc
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    def exit_codes(self) -> dict[str, int]:
        total: Counter[int] = Counter()
        for replica in self.replicas:
            total.update(replica.exit_codes)
        return {str(code): n for code, n in sorted(total.items())}
