"""Where the `tessera` CLI is: the package and the CLI talk to the same clusters (the same state
folder rules: $TESSERA_STATE_DIR, else ~/.local/state/tessera).

Looked up in order: $TESSERA_BIN; in a build tree, build/bin/tessera (the package lies in
build/python/tessera); installed, <prefix>/bin/tessera (the package lies in
<prefix>/lib/python3.X/dist-packages/tessera); else `tessera` on PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def tessera_bin() -> str:
    """The CLI's path; FileNotFoundError naming the places looked at when there is none."""
    from_env = os.environ.get("TESSERA_BIN")
    if from_env:
        if not os.access(from_env, os.X_OK):
            raise FileNotFoundError(f"TESSERA_BIN={from_env} is not an executable file")
        return from_env
    candidates = [
        _PACKAGE.parent.parent / "bin" / "tessera",  # build/python/tessera -> build/bin
        _PACKAGE.parents[3] / "bin" / "tessera" if len(_PACKAGE.parents) > 3 else None,
    ]
    for candidate in candidates:
        if candidate is not None and os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    on_path = shutil.which("tessera")
    if on_path:
        return on_path
    looked = ", ".join(str(c) for c in candidates if c is not None)
    raise FileNotFoundError(f"cannot find the tessera CLI (set TESSERA_BIN; looked at {looked} "
                            "and PATH)")
