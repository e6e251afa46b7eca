"""A stand-in for the `jax` package, for tests/python/test_train_jax.py: JAX cannot be installed
on the machines that run the tests, so JaxTrainer is tested against this instead. It is put on
the path of the test's driver (and so of its workers) only.

It has what tessera.train.jax and the tests' training functions touch: `jax.distributed`
(initialize, shutdown, is_initialized, and `calls`, the record of both), `process_index()`,
`process_count()`, and `platforms_at_import`, JAX_PLATFORMS as it was when jax was imported.
"""

import os

from jax import distributed

platforms_at_import = os.environ.get("JAX_PLATFORMS")


def process_index():
    state = distributed._state
    return state["process_id"] if state else 0


def process_count():
    state = distributed._state
    return state["num_processes"] if state else 1
