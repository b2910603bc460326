"""Run the README's quick-start against an installed Dalenius, and check the wheel's files.

CI builds the wheel, installs it (base dependencies only) into a fresh virtual environment and
runs this script with that environment's Python, from outside the source tree: a module, a console
asset or a data file missing from the wheel then fails here, never on a user's machine.

The commands are read from README.md itself ("## Use it"): the first Python block is executed as
is, and every line of the shell block that starts with ``dalenius`` and holds no ``...`` is run;
they run in a scratch folder after ``dalenius demo`` has written ``dalenius-demo/census.toml``.

Usage: python quickstart.py REPO WHEEL
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def section(readme: str, title: str) -> str:
    """The text of the README section headed ``## title``."""
    start = readme.index(f"\n## {title}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end >= 0 else None]


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``language`` in ``text``, in order."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def check_wheel(repo: Path, wheel: Path) -> None:
    """Every file of the package in the source tree (code, console assets, py.typed) is in the wheel."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "src/dalenius"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    wanted = {name.removeprefix("src/") for name in listed}
    with zipfile.ZipFile(wheel) as archive:
        present = set(archive.namelist())
    missing = sorted(wanted - present)
    if missing:
        sys.exit(f"the wheel lacks {len(missing)} package file(s): {', '.join(missing[:10])}")
    print(f"wheel: all {len(wanted)} package files present")


def main() -> None:
    """Check the wheel, then run the quick-start with the installed package."""
    repo, wheel = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    check_wheel(repo, wheel)
    use = section((repo / "README.md").read_text(encoding="utf-8"), "Use it")
    python = blocks(use, "python")[0]
    shell = [
        line.split("#")[0].strip()
        for line in blocks(use, "sh")[0].splitlines()
        if line.startswith("dalenius ") and "..." not in line
    ]
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        import dalenius

        where = Path(dalenius.__file__).resolve()
        if repo / "src" in where.parents:
            sys.exit(f"dalenius was imported from the source tree ({where}), not the wheel")
        subprocess.run(
            ["dalenius", "demo", "--people", "2000"], env=env, check=True, stdout=subprocess.DEVNULL
        )
        print(f"README Python block ({len(python.splitlines())} lines):")
        exec(compile(python, "README.md", "exec"), {})
        for line in shell:
            print(f"$ {line}")
            subprocess.run(shlex.split(line), env=env, check=True)
        done = subprocess.run(["dalenius", "--version"], env=env, check=True, capture_output=True)
        print(f"quick-start passed with {done.stdout.decode().strip()} from {where.parent}")


if __name__ == "__main__":
    main()
