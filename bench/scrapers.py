"""``python -m bench.scrapers URL N``: N clients GET ``URL`` in a loop, each as soon as
its last answer came, until stdin closes; then prints how many answers came back
(``bench e2e --scrapers``). A separate process, as Prometheus replicas would be."""

from __future__ import annotations

import asyncio
import sys

import aiohttp


async def scrape(url: str, clients: int) -> int:
    stop = asyncio.Event()
    answered = 0

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal answered
        while not stop.is_set():
            try:
                async with session.get(url) as resp:
                    await resp.read()
                answered += 1
            except aiohttp.ClientError:
                await asyncio.sleep(0.01)

    async def wait_for_stdin() -> None:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        stop.set()

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(wait_for_stdin(), *(client(session) for _ in range(clients)))
    return answered


def main() -> None:
    url, clients = sys.argv[1], int(sys.argv[2])
    print(asyncio.run(scrape(url, clients)), flush=True)


if __name__ == "__main__":
    main()
