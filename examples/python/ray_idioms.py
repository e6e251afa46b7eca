"""Ray programs' everyday idioms, written as a Ray user writes them with `ray` renamed `tessera`:
refs returned from tasks and read by the driver, several returns, a streaming generator read as
it produces, an async actor with a concurrency group, a named actor found again in its
namespace, and a get that fails at the first failure.

    scripts/run-example python ray_idioms      (brings up examples/clusters/demo.yaml)

or, on a cluster already up (`tessera up examples/clusters/demo.yaml`), `python3 ray_idioms.py`.
"""
import asyncio
import time

import numpy as np

import tessera


# --- tasks that return refs, and several values ------------------------------------------------

@tessera.remote
def load_shard(i):
    # A large value goes into this node's object store; the caller gets a ref to it.
    return tessera.put(np.full(250_000, float(i)))


@tessera.remote(num_returns=2)
def stats(shard):
    return float(shard.mean()), float(shard.max())


# --- a streaming generator -----------------------------------------------------------------------

@tessera.remote
def tokens(text):
    for word in text.split():
        time.sleep(0.05)  # as a model would, one token at a time
        yield word.upper()


# --- an async actor with a concurrency group ---------------------------------------------------

@tessera.remote(concurrency_groups={"io": 2})
class Cache:
    def __init__(self):
        self.entries = {}

    @tessera.method(concurrency_group="io")
    async def fetch(self, key):
        await asyncio.sleep(0.05)
        return self.entries.get(key, f"miss:{key}")

    async def store(self, key, value):
        self.entries[key] = value
        return len(self.entries)


@tessera.remote
def fail_fast():
    raise ValueError("this one fails at once")


@tessera.remote
def slow():
    time.sleep(30)
    return "slow"


def main():
    tessera.init(namespace="idioms")

    # Refs made inside tasks are read here, from the processes that made them.
    shard_refs = tessera.get([load_shard.remote(i) for i in range(3)])
    means = []
    for ref in shard_refs:
        mean, top = stats.remote(ref)
        means.append(tessera.get(mean))
        assert tessera.get(top) == tessera.get(mean)
    print("shard means:", means)

    # Values of a generator arrive while it still runs.
    started = time.monotonic()
    for i, ref in enumerate(tokens.remote("the quick brown fox jumps")):
        print(f"token {i} after {time.monotonic() - started:.2f}s: {tessera.get(ref)}")

    # An async actor, named in this job's namespace, found again by name.
    cache = Cache.options(name="cache", get_if_exists=True).remote()
    tessera.get(cache.store.remote("a", 1))
    again = tessera.get_actor("cache", namespace="idioms")
    print("fetched:", tessera.get([again.fetch.remote("a"), again.fetch.remote("b")]))

    # A failure next to a slow task raises at once, without waiting for the slow one.
    slow_ref = slow.options(num_cpus=0.5).remote()
    started = time.monotonic()
    try:
        tessera.get([slow_ref, fail_fast.remote()])
    except ValueError as e:
        print(f"failed fast after {time.monotonic() - started:.2f}s: {e.cause}")
    tessera.cancel(slow_ref, force=True)
    tessera.kill(cache)
    print("done")


if __name__ == "__main__":
    main()
