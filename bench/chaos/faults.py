"""Each fault kind of a chaos run, injected into the embedded API server or the replicas.

``Injector.inject(kind)`` runs one fault and returns what it did, in a few words.
API faults use ``ApiServer.faults`` (troupe/sim/apiserver/harness/faults.py): failures and
delays matching a path for a short burst, cut watches, compaction. Process faults
go through ``Replicas`` (SIGKILL, SIGSTOP/SIGCONT of the leader). Cluster faults
write to the store directly: nodes, PodGroups and pods deleted or changed while a
gang is being bound, malformed objects, and the Lease itself (deleted, given to the
standby, its duration set to 0: ``lease.py``) while the leader binds a burst.

"Mid-gang" faults create a gang and fire right after a seeded number k (0 < k <
size) of its members was bound, as the store commits the k-th binding (``Tracker``),
so the rest of the gang is in flight or still queued. If the gang binds no member
within the wait (no leader, say), the fault fires anyway and the line says so.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from collections.abc import Callable

from troupe.sim.apiserver.harness.faults import Rule
from troupe.sim.apiserver.storage.store import Store
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from bench.chaos import lease
from bench.chaos.malformed import malformed_burst
from bench.chaos.plan import Settings
from bench.chaos.replicas import Replicas
from bench.chaos.workload import (
    NAMESPACE,
    Gang,
    Tracker,
    Workload,
    cordon_all,
)

WAIT = 20.0  # seconds a mid-gang or mid-burst fault waits for its moment
# Where a burst of errors or delays lands: bindings, every pod request (watches and
# status patches too), events, PodGroups (their status writes), the Lease's renewals,
# or everything.
PATHS = ("/binding$", "/pods", "/events", "/podgroups", "/leases", "")


async def poll(check: Callable[[], bool], timeout: float) -> bool:
    """Whether ``check`` came true within ``timeout`` (looked at every 50 ms)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


class Injector:
    def __init__(
        self,
        cluster: SimCluster,
        workload: Workload,
        replicas: Replicas,
        tracker: Tracker,
        settings: Settings,
        rng: random.Random,
    ) -> None:
        self.cluster = cluster
        self.faults = cluster.server.faults
        self.workload = workload
        self.replicas = replicas
        self.tracker = tracker
        self.settings = settings
        self.rng = rng
        self.injected: Counter[str] = Counter()
        self.requests_hit: Counter[str] = Counter()
        self.missed: Counter[str] = Counter()  # fired without reaching the moment aimed at
        self.paused_exit_codes: Counter[str] = Counter()
        # How the leader whose Lease was edited ended, per Lease fault kind.
        self.lease_edit_exit_codes: defaultdict[str, Counter[str]] = defaultdict(Counter)
        # Gangs whose bound part still held its resources when the room came back,
        # long past the group's timeout (room_taken_mid_gang).
        self.partial_held = 0
        self._malformed = 0

    async def inject(self, kind: str) -> str:
        method = getattr(self, f"_{kind}")
        said: str = await method()
        self.injected[kind] += 1
        return said

    # --- helpers -----------------------------------------------------------------------

    async def _mid_gang(self, kind: str, low: int, high: int) -> Gang:
        """A new gang of low..high members, once k of them (0 < k < size) are bound."""
        gang = self.workload.gang(self.rng.randint(low, high))
        k = self.rng.randint(1, len(gang.members) - 1)
        if not await self.tracker.until(lambda: len(self.tracker.bound[gang.name]) >= k, WAIT):
            self.missed[kind] += 1
        return gang

    async def _burst(self, rule: Rule, seconds: float) -> None:
        """Let ``rule`` act for ``seconds`` (longer, up to ``WAIT``, until it has met a
        request), with a little work arriving so there are requests; then reset."""
        self.workload.plain_wave(self.rng.randint(5, 15))
        await asyncio.sleep(seconds)
        await poll(lambda: rule.hits > 0, WAIT)
        self.faults.reset()

    # --- API faults --------------------------------------------------------------------

    async def _watch_cut(self) -> str:
        cuts = self.rng.randint(1, 3)
        dropped = 0
        for _ in range(cuts):
            dropped += self.faults.drop_watches()
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
        return f"cut {dropped} watch streams in {cuts} rounds"

    async def _watch_expired(self) -> str:
        # Some writes first, so every watcher's last resourceVersion is behind; the
        # history is then forgotten and the streams cut: re-watching gets 410 Gone.
        self.workload.plain_wave(self.rng.randint(3, 8))
        await asyncio.sleep(self.rng.uniform(0.05, 0.3))
        self.cluster.store.compact()
        dropped = self.faults.drop_watches()
        return f"compacted the history and cut {dropped} watch streams"

    async def _api_errors(self, kind: str, codes: tuple[int, ...]) -> str:
        path, code = self.rng.choice(PATHS), self.rng.choice(codes)
        seconds = self.rng.uniform(0.5, 2.5)
        retry_after = 1.0 if code in (429, 503) else None
        # Against a leader at work: a burst in a leaderless gap would meet no write.
        await self.replicas.wait_for_leader(WAIT)
        rule = self.faults.fail("*", path, code, times=-1, retry_after=retry_after)
        await self._burst(rule, seconds)
        self.requests_hit[kind] += rule.hits
        return f"{code} on {path or 'every path'!r} for {seconds:.1f}s: {rule.hits} requests"

    async def _api_5xx(self) -> str:
        return await self._api_errors("api_5xx", (500, 503, 504))

    async def _api_429(self) -> str:
        return await self._api_errors("api_429", (429,))

    async def _binding_409(self) -> str:
        times = self.rng.randint(2, 6)
        await self.replicas.wait_for_leader(WAIT)
        rule = self.faults.fail("POST", "/binding$", 409, times=times)
        gang = self.workload.gang(self.rng.randint(4, 16))
        self.workload.plain_wave(self.rng.randint(3, 10))
        await poll(lambda: rule.hits >= times, WAIT)
        self.faults.reset()
        self.requests_hit["binding_409"] += rule.hits
        return f"409 on {rule.hits}/{times} bindings (gang {gang.name} arriving)"

    async def _slow_responses(self) -> str:
        path = self.rng.choice(PATHS)
        delay, seconds = self.rng.uniform(0.2, 1.5), self.rng.uniform(2.0, 5.0)
        await self.replicas.wait_for_leader(WAIT)
        rule = self.faults.delay("*", path, delay, times=-1)
        await self._burst(rule, seconds)
        self.requests_hit["slow_responses"] += rule.hits
        where = path or "every path"
        return f"{delay:.2f}s delay on {where!r} for {seconds:.1f}s: {rule.hits} requests"

    # --- the leader's process ----------------------------------------------------------

    async def _kill_leader_mid_burst(self) -> str:
        leader = await self.replicas.wait_for_leader(WAIT)
        names = self.workload.plain_wave(self.rng.randint(30, 60))
        k = self.rng.randint(3, len(names) // 2)
        wanted = set(names)
        reached = await self.tracker.until(
            lambda: len(wanted & self.tracker.plain_bound) >= k, WAIT
        )
        if not reached:
            self.missed["kill_leader_mid_burst"] += 1
        victim = self.replicas.leader() or leader
        if victim is None:
            return "no leader to kill"
        self.replicas.kill(victim)
        bound = len(wanted & self.tracker.plain_bound)
        return f"SIGKILL {victim.name} with {bound}/{len(names)} pods of a burst bound"

    async def _kill_leader_mid_gang(self) -> str:
        await self.replicas.wait_for_leader(WAIT)
        gang = await self._mid_gang("kill_leader_mid_gang", 20, 50)
        victim = self.replicas.leader()
        if victim is None:
            return f"no leader to kill ({gang.name})"
        self.replicas.kill(victim)
        bound = len(self.tracker.bound[gang.name])
        return f"SIGKILL {victim.name} with {bound}/{len(gang.members)} of {gang.name} bound"

    async def _room_taken_mid_gang(self) -> str:
        # The case gang recovery exists for: the leader dies with part of a gang bound
        # and, before anyone finishes it, the room its remaining members need is gone
        # (here every node is cordoned, as in a drain). The next leader must not leave
        # the bound part holding its resources: past the group's timeout it evicts it
        # (partialGangPolicy Evict), the controller recreates the pods, and the gang
        # binds whole once room returns.
        await self.replicas.wait_for_leader(WAIT)
        gang = await self._mid_gang("room_taken_mid_gang", 20, 50)
        victim = self.replicas.leader()
        if victim is not None:
            self.replicas.kill(victim)
        bound = len(self.tracker.bound[gang.name])
        cordoned = cordon_all(self.cluster.store, True)
        timeout = float(self.workload.groups[gang.name]["spec"]["scheduleTimeoutSeconds"])
        # The next leader takes over after the lease, sees the gang partly bound,
        # and evicts it once the group's timeout has passed.
        hold = self.settings.lease.duration + timeout + self.rng.uniform(8.0, 11.0)
        await asyncio.sleep(hold)
        left = len(self.tracker.bound[gang.name])
        if 0 < left < gang.min_member:
            self.partial_held += 1
        cordon_all(self.cluster.store, False)
        killed = f"SIGKILL {victim.name}" if victim is not None else "no leader to kill"
        return (
            f"{killed} with {bound}/{len(gang.members)} of {gang.name} bound; {cordoned} nodes "
            f"cordoned for {hold:.1f}s; {left} still bound when it came back"
        )

    async def _pause_leader(self) -> str:
        leader = await self.replicas.wait_for_leader(WAIT)
        if leader is None or leader.current is None:
            return "no leader to pause"
        incarnation = leader.current
        self.workload.plain_wave(self.rng.randint(10, 30))
        self.workload.gang()
        await asyncio.sleep(self.rng.uniform(0.0, 0.5))
        self.replicas.pause(leader)
        seconds = self.settings.lease.duration + self.rng.uniform(1.0, 2.5)
        await asyncio.sleep(seconds)
        self.replicas.resume(leader)
        # Fenced: it must stop and exit 1 rather than write without the Lease.
        try:
            code = await asyncio.wait_for(incarnation.proc.wait(), 15)
        except TimeoutError:
            code = None
        self.paused_exit_codes[str(code)] += 1
        return f"SIGSTOP {leader.name} for {seconds:.1f}s; after SIGCONT it exited {code}"

    # --- the Lease, edited by someone else ----------------------------------------------

    async def _lease_edit(self, kind: str, edit: Callable[[str], str]) -> str:
        """While the leader binds a burst (k of its pods bound), ``edit(standby
        identity)`` the Lease; the leader must stop writing at once and exit 1."""
        leader = await self.replicas.wait_for_leader(WAIT)
        if leader is None or leader.current is None:
            self.missed[kind] += 1
            return "no leader"
        incarnation = leader.current
        standby = await self.replicas.identity_of(self.replicas.other(leader), WAIT)
        if not standby:  # the other replica never came up to take the Lease
            self.missed[kind] += 1
        names = self.workload.plain_wave(self.rng.randint(20, 40))
        wanted, k = set(names), self.rng.randint(2, 8)
        if not await self.tracker.until(lambda: len(wanted & self.tracker.plain_bound) >= k, WAIT):
            self.missed[kind] += 1
        bound = len(wanted & self.tracker.plain_bound)
        said = edit(standby)
        try:
            code = await asyncio.wait_for(incarnation.proc.wait(), 15)
        except TimeoutError:
            code = None
        self.lease_edit_exit_codes[kind][str(code)] += 1
        burst = f"{bound}/{len(names)} pods of a burst bound"
        return f"{said} with {burst}; {leader.name} exited {code}"

    @property
    def _lease(self) -> tuple[Store, str, str]:
        return self.cluster.store, self.settings.lease.namespace, self.settings.lease.name

    async def _lease_deleted(self) -> str:
        return await self._lease_edit("lease_deleted", lambda _: lease.delete(*self._lease))

    async def _lease_stolen(self) -> str:
        def steal(to: str) -> str:
            return lease.steal(*self._lease, to or "nobody")

        return await self._lease_edit("lease_stolen", steal)

    async def _lease_zero_duration(self) -> str:
        def zero(_: str) -> str:
            return lease.zero_duration(*self._lease)

        return await self._lease_edit("lease_zero_duration", zero)

    # --- cluster objects ---------------------------------------------------------------

    async def _node_deleted_mid_gang(self) -> str:
        gang = await self._mid_gang("node_deleted_mid_gang", 8, 30)
        pods_rt = self.cluster.store.resolve("pods")
        nodes = []
        for member in sorted(self.tracker.bound[gang.name]):
            obj = self.cluster.store.find(pods_rt, NAMESPACE, member)
            if obj is not None and obj["spec"].get("nodeName"):
                nodes.append(obj["spec"]["nodeName"])
        node = nodes[0] if nodes else self.rng.choice(self.cluster.node_names)
        self.cluster.remove_node(node)
        await asyncio.sleep(self.rng.uniform(1.0, 3.0))
        spec = NodeSpec(count=1, cpu=self.settings.node_cpu, memory=self.settings.node_memory)
        [added] = self.cluster.add_nodes(spec)
        return f"deleted {node} under {gang.name}; {added} joined"

    async def _podgroup_deleted_mid_cycle(self) -> str:
        if self.rng.random() < 0.5:
            gang = self.workload.gang(self.rng.randint(6, 30))
            await asyncio.sleep(self.rng.uniform(0.0, 0.2))
            moment = "as it arrived"
        else:
            gang = await self._mid_gang("podgroup_deleted_mid_cycle", 6, 30)
            moment = f"with {len(self.tracker.bound[gang.name])} members bound"
        hold = self.rng.uniform(1.0, 3.0)
        self.workload.hold_group(gang.name, hold)
        return f"deleted PodGroup {gang.name} {moment}; back after {hold:.1f}s"

    async def _malformed_burst(self) -> str:
        self._malformed += 1
        objects = malformed_burst(self._malformed, self.rng)
        self.workload.add_malformed(objects)
        names = self.workload.plain_wave(self.rng.randint(5, 10))
        return f"{len(objects)} malformed objects, then {len(names)} plain pods"

    async def _pod_updates_mid_gang(self) -> str:
        gang = await self._mid_gang("pod_updates_mid_gang", 8, 30)
        loop = asyncio.get_running_loop()
        end, updates = loop.time() + self.rng.uniform(1.0, 2.5), 0
        while loop.time() < end:
            member = self.rng.choice(gang.members)
            try:
                obj = self.cluster.store.get("pods", member, NAMESPACE)
            except Exception:  # deleted meanwhile: the controller brings it back
                await asyncio.sleep(0.02)
                continue
            meta = obj["metadata"]
            meta.setdefault("labels", {})[f"chaos.troupe.dev/touch-{updates % 3}"] = str(updates)
            meta.setdefault("annotations", {})["chaos.troupe.dev/touched"] = str(updates)
            self.cluster.store.update("pods", obj)
            updates += 1
            await asyncio.sleep(0.02)
        bound = len(self.tracker.bound[gang.name])
        return f"{updates} label/annotation updates on {gang.name} ({bound} bound at the end)"

    async def _recreate_pods(self) -> str:
        names = self.workload.plain_wave(self.rng.randint(15, 30))
        k = self.rng.randint(1, len(names) // 2)
        await self.tracker.until(lambda: len(set(names) & self.tracker.plain_bound) >= k, WAIT)
        chosen = self.rng.sample(names, self.rng.randint(3, 8))
        bound = sum(1 for n in chosen if n in self.tracker.plain_bound)
        for name in chosen:
            self.workload.recreate_pod(name)
        return f"deleted and recreated {len(chosen)} pods ({bound} of them bound)"

    async def _recreate_gang(self) -> str:
        gang = await self._mid_gang("recreate_gang", 6, 30)
        bound = len(self.tracker.bound[gang.name])
        self.workload.recreate_gang(gang)
        return f"deleted and recreated {gang.name} with {bound}/{len(gang.members)} bound"
