"""`python3 -m tessera ARGS` is the `tessera` CLI with ARGS (the same binary the package uses)."""

import os
import sys

from tessera._private.binary import tessera_bin


def main() -> None:
    binary = tessera_bin()
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
