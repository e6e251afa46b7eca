"""A Python worker process: `python3 -m tessera._private.worker_main`, the command a Python
driver's leases start (the node agent sets the worker's environment: its owner, token file and
node). It serves the runtime's Worker service from C++ and runs the pushed tasks here, on the
main thread (signal handlers, such as a DataLoader's, can only be installed there), until the
owner lets it go; then it flushes its output and exits.
"""

import signal
import sys


def main() -> None:
    from tessera import _core
    from tessera._private import executor as executor_module

    if not _core.is_worker():
        sys.exit("tessera._private.worker_main runs only as a worker a node agent started "
                 "(TESSERA_WORKER_MODE=1)")
    try:
        _core.start_worker()
    except _core.CoreError as e:
        sys.stderr.write(f"tessera worker: {e.args[1]}\n")
        sys.stderr.flush()
        sys.exit(1)
    # A cancel interrupts the running task with SIGINT (KeyboardInterrupt), whatever the
    # worker's parent left the signal set to.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    executor = executor_module.Executor()
    executor_module.active = executor
    while True:
        try:
            task = _core.next_task(0.5)
            if task is not None:
                executor.run(task)
            elif _core.worker_ended(0):
                break
        except KeyboardInterrupt:
            # A cancel's interrupt that landed after its task ended: nothing to stop.
            continue
    sys.stdout.flush()
    sys.stderr.flush()
    _core.worker_exit()


if __name__ == "__main__":
    main()
