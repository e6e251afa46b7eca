"""Every C and C++ file of the project is laid out as .clang-format says (Google's style, 100
columns). Run `clang-format -i FILE` on a file this names; scripts/setup installs clang-format."""
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUFFIXES = (".c", ".cc", ".cu", ".h")
# Folders whose files are not the project's own code.
SKIPPED = {"build", "build-fuzz", ".git", "node_modules"}


def source_files():
    files = []
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in SKIPPED or relative.parts[0].startswith("build"):
            continue
        if path.suffix in SUFFIXES and path.is_file():
            files.append(path)
    return files


def test_every_source_file_is_formatted():
    clang_format = shutil.which("clang-format")
    assert clang_format, "clang-format is not installed (scripts/setup installs it)"
    files = source_files()
    assert len(files) > 500, f"found only {len(files)} source files under {ROOT}"
    unformatted = []
    for start in range(0, len(files), 100):
        batch = files[start:start + 100]
        result = subprocess.run([clang_format, "--dry-run", "--Werror", *map(str, batch)],
                                capture_output=True, text=True, cwd=ROOT)
        for line in result.stderr.splitlines():
            if ": error: code should be clang-formatted" in line:
                name = line.split(":", 1)[0]
                if name not in unformatted:
                    unformatted.append(name)
        assert result.returncode == 0 or unformatted, result.stderr[-2000:]
    assert not unformatted, ("not laid out as .clang-format says (run clang-format -i): " +
                             ", ".join(str(pathlib.Path(n).relative_to(ROOT)) for n in unformatted))
