"""Checkpoints and the run's record in its storage folder `<storage_path>/<name>/`:

  checkpoint_NNNNNN/   one per report that passed a checkpoint (every passing rank's files,
                       merged); NNNNNN counts the run's registered checkpoints from 0
  result.jsonl         one line per report: rank 0's metrics, the checkpoint it registered
  state.json           the registered checkpoints still kept (oldest first, each with its
                       report's metrics) and the next checkpoint number; rewritten atomically
                       (temp file + os.replace), so a rank killed mid-write leaves the last one

Only rank 0 writes result.jsonl and state.json; the folder must be visible to every rank's host.

Threading: a RunRecord is used by one thread. Cost: file-system calls per report.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

STATE_FILE = "state.json"
RESULT_FILE = "result.jsonl"
CHECKPOINT_PREFIX = "checkpoint_"
_METADATA_FILE = ".metadata.json"


class Checkpoint:
    """A directory of files (on a file system every rank and the driver see)."""

    def __init__(self, path: "str | os.PathLike", filesystem: Any = None) -> None:
        if filesystem is not None:
            raise ValueError("Checkpoint(filesystem=...) is not supported: checkpoints are "
                             "local or shared-file-system directories")
        self.path = str(Path(os.fspath(path)).expanduser().resolve())
        self.filesystem = None

    @classmethod
    def from_directory(cls, path: "str | os.PathLike") -> "Checkpoint":
        if not Path(os.fspath(path)).is_dir():
            raise ValueError(f"Checkpoint.from_directory: {path} is not a directory")
        return cls(path)

    def to_directory(self, path: "Optional[str | os.PathLike]" = None) -> str:
        """Copies the checkpoint's files into `path` (a new temporary folder when None)."""
        target = Path(os.fspath(path)) if path is not None else Path(
            tempfile.mkdtemp(prefix="tessera_checkpoint_"))
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return str(target)

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint's own folder (local: no copy, nothing removed after); read it only."""
        yield self.path

    def get_metadata(self) -> Dict[str, Any]:
        try:
            return json.loads((Path(self.path) / _METADATA_FILE).read_text())
        except FileNotFoundError:
            return {}

    def set_metadata(self, metadata: Dict[str, Any]) -> None:
        _write_atomically(Path(self.path) / _METADATA_FILE, json.dumps(metadata))

    def update_metadata(self, metadata: Dict[str, Any]) -> None:
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(filesystem=local, path={self.path})"


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _jsonable(value: Any) -> Any:
    """A metric JSON cannot write as it is: a tensor or NumPy scalar's number, else its text."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            pass
    return str(value)


class RunRecord:
    """The run folder's state.json and result.jsonl."""

    def __init__(self, run_dir: "str | os.PathLike") -> None:
        self.run_dir = Path(run_dir)

    def state(self) -> Dict[str, Any]:
        try:
            state = json.loads((self.run_dir / STATE_FILE).read_text())
        except FileNotFoundError:
            state = {}
        state.setdefault("checkpoints", [])
        state.setdefault("next_index", 0)
        return state

    def checkpoint_dir(self, index: int) -> Path:
        return self.run_dir / f"{CHECKPOINT_PREFIX}{index:06d}"

    def latest_checkpoint(self) -> Optional[Checkpoint]:
        kept = self.state()["checkpoints"]
        return Checkpoint(self.run_dir / kept[-1]["dir"]) if kept else None

    def kept_checkpoints(self) -> List[Dict[str, Any]]:
        return self.state()["checkpoints"]

    def last_metrics(self) -> Optional[Dict[str, Any]]:
        try:
            lines = (self.run_dir / RESULT_FILE).read_text().splitlines()
        except FileNotFoundError:
            return None
        for line in reversed(lines):
            if line.strip():
                try:
                    return json.loads(line)["metrics"]
                except (ValueError, KeyError):
                    continue  # a torn last line from a killed rank 0
        return None

    def remove_unregistered_checkpoints(self) -> None:
        """Removes checkpoint folders no state.json names (copied by an attempt that died
        before registering them): their numbers are used again."""
        kept = {entry["dir"] for entry in self.state()["checkpoints"]}
        for path in self.run_dir.glob(f"{CHECKPOINT_PREFIX}*"):
            if path.is_dir() and path.name not in kept:
                shutil.rmtree(path, ignore_errors=True)

    def record_report(self, metrics: Dict[str, Any], checkpoint_index: Optional[int],
                      attempt: int, keep: Any) -> None:
        """Appends rank 0's report; with a checkpoint, registers it and drops those `keep`
        (a CheckpointConfig) no longer keeps."""
        state = self.state()
        entry_dir = None
        if checkpoint_index is not None:
            entry_dir = self.checkpoint_dir(checkpoint_index).name
            state["checkpoints"].append({"dir": entry_dir, "metrics": metrics})
            state["next_index"] = checkpoint_index + 1
            state["checkpoints"], dropped = _kept(state["checkpoints"], keep)
        else:
            dropped = []
        line = json.dumps({"metrics": metrics, "checkpoint_dir_name": entry_dir,
                           "attempt": attempt}, default=_jsonable)
        with open(self.run_dir / RESULT_FILE, "a") as f:
            f.write(line + "\n")
        _write_atomically(self.run_dir / STATE_FILE, json.dumps(state, default=_jsonable))
        for entry in dropped:
            shutil.rmtree(self.run_dir / entry["dir"], ignore_errors=True)


def _kept(entries: List[Dict[str, Any]], keep: Any):
    """(kept in report order, dropped): the newest num_to_keep, or the best by the score
    attribute plus the latest."""
    if keep.num_to_keep is None or len(entries) <= keep.num_to_keep:
        return entries, []
    if keep.checkpoint_score_attribute is None:
        return entries[-keep.num_to_keep:], entries[:-keep.num_to_keep]
    attribute = keep.checkpoint_score_attribute
    sign = 1 if keep.checkpoint_score_order == "max" else -1

    def score(i: int):
        value = entries[i]["metrics"].get(attribute)
        return (0, 0.0) if value is None else (1, sign * float(value))  # missing: the worst

    ranked = sorted(range(len(entries)), key=score, reverse=True)
    keep_indices = set(ranked[:keep.num_to_keep]) | {len(entries) - 1}
    return ([e for i, e in enumerate(entries) if i in keep_indices],
            [e for i, e in enumerate(entries) if i not in keep_indices])
