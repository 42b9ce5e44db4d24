"""Rebuild the conformance corpus of MANIFEST.md into a cache folder outside the repository.

    python tests/v1/corpus/build.py SOURCES CACHE
    python -m opsdk.v1.check CACHE --jobs 2

SOURCES holds one git repository per public repository of the manifest, named `owner+name`
(a bare clone or a clone with a work tree: `git clone --bare https://github.com/owner/name
SOURCES/owner+name`); the exact commit of each line is read from it with `git show`, so the
programs are the ones the manifest names whatever the clones' newest commit. CACHE receives one
adapted file per program (its name: owner__repo__path), the synthetic MNIST stand-in as the
package `input_data/`, and the helper folders a program imports. Nothing of it belongs in the
repository: the project commits only the manifest and this script.

The adaptation rules (each changed line ends with `# opsdk-corpus: was <the original line>`):

1. Imports: none change. `python -m opsdk.v1.check` answers `import tensorflow` with opsdk.v1
   (or TensorFlow's compat.v1), so the programs keep their own import lines.
2. Data: `from tensorflow.examples.tutorials.mnist import input_data` (or its `import ... as
   input_data` form) becomes `import input_data`, the synthetic MNIST of examples/input_data.py
   (same interface, no download).
3. Step counts: assignments of the usual loop-length names are capped (epochs to 2, steps to 20,
   iterations counted in examples to 2000), a literal `range(N)` with N >= 100 in a `for` line
   becomes `range(2)`, and so does `for epoch in range(N)` (any loop variable naming epochs)
   with N > 2; `range(start, N)` with N >= 100 becomes `range(start, min(N, start + 2))`, and
   a loop over an epoch's batches, `range(<data>.num_examples // batch_size)`, runs at most 20
   (`range(min(20, ...))`), so every program ends in seconds.
4. Helpers: a program importing `libs` (pkmital's tutorials) gets its repository's `libs/` at
   the same commit, adapted by the same rules, and a program importing a module that sits
   beside it gets that module (as a package of its name, so that it is not run as a program).
5. Waiting for the user: `plt.waitforbuttonpress()` becomes `pass` (plots are drawn off screen,
   where it would wait forever).
6. Data files: a quoted name in the program of a data file (`.csv`, `.txt`, `.dat`, `.tsv`,
   `.json`, `.npy`, `.npz`, `.data`) that its repository holds beside the program at the same
   commit (`'data-01-test-score.csv'`) is copied, unchanged, to that name in CACHE, where the
   check runs the program.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MARK = "# opsdk-corpus: was "
_LINE = re.compile(r"^- `(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{40}) (?P<path>[^`]+)`"
                   r"(?: \| (?P<license>.*))?$")
_CAPS = {2: ("training_epochs", "training_epoch", "epochs", "num_epochs", "n_epochs",
             "total_epoch", "epoch_num"),
         20: ("num_steps", "training_steps", "max_steps", "num_iterations", "n_iterations",
              "training_iteration", "steps", "iterations"),
         2000: ("training_iters",)}
_ASSIGN = re.compile(r"^(\s*)(%s)(\s*=\s*)(\d+)(\s*(#.*)?)$"
                     % "|".join(n for names in _CAPS.values() for n in names))
_RANGE = re.compile(r"^(\s*for (.*) in (?:x?range)\()(\d+)(\):.*)$")
_RANGE_FROM = re.compile(r"^(\s*for .* in (?:x?range)\()(\w+), (\d+)(\):.*)$")
_BATCHES = re.compile(r"^(\s*for .* in (?:x?range)\()([\w.]*num_examples\s*//\s*\w+)(\):.*)$")
_WAIT = re.compile(r"^(\s*)plt\.waitforbuttonpress\(\)\s*$")
_MNIST = re.compile(r"^(\s*)(?:from tensorflow\.examples\.tutorials\.mnist import input_data|"
                    r"import tensorflow\.examples\.tutorials\.mnist\.input_data as input_data)\s*$")


@dataclass(frozen=True)
class Entry:
    """One manifest line: a program at a commit of a public repository."""

    repo: str
    commit: str
    path: str
    license: Optional[str]

    @property
    def cache_name(self) -> str:
        flat = re.sub(r"[^\w]+", "_", self.path.removesuffix(".py"))
        return f"{self.repo.replace('/', '__')}__{flat}"


def read_manifest(path: Path = HERE / "MANIFEST.md") -> list[Entry]:
    """The manifest's program lines (`- \\`owner/repo@commit path\\` | license`)."""
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("- `"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise SystemExit(f"{path}:{number}: not `owner/repo@<40 hex> path` | license: {line}")
        entries.append(Entry(match["repo"], match["commit"], match["path"].strip(), match["license"]))
    return entries


def adapt(source: str) -> str:
    """The program with the adaptation rules applied, each changed line marked."""
    out = []
    for line in source.splitlines():
        new = _adapt_line(line)
        out.append(line if new == line else f"{new}  {MARK}{line.strip()}")
    return "\n".join(out) + "\n"


def _adapt_line(line: str) -> str:
    if _WAIT.match(line):
        return _WAIT.sub(r"\1pass", line)
    if _MNIST.match(line):
        return _MNIST.sub(r"\1import input_data", line)
    match = _ASSIGN.match(line)
    if match:
        cap = next(c for c, names in _CAPS.items() if match[2] in names)
        if int(match[4]) > cap:
            return f"{match[1]}{match[2]}{match[3]}{cap}"
    match = _RANGE.match(line)
    if match and (int(match[3]) >= 100 or ("epoch" in match[2] and int(match[3]) > 2)):
        return f"{match[1]}2{match[4]}"
    match = _RANGE_FROM.match(line)
    if match and int(match[3]) >= 100:
        return f"{match[1]}{match[2]}, min({match[3]}, {match[2]} + 2){match[4]}"
    match = _BATCHES.match(line)
    if match:
        return f"{match[1]}min(20, {match[2]}){match[3]}"
    return line


def _git(sources: Path, entry: Entry, *command: str) -> subprocess.CompletedProcess:
    """git `command` in the clone SOURCES/owner+name (bare, with a work tree, or a stored
    mirror's layout, whose git directory is `repo` inside)."""
    clone = sources / entry.repo.replace("/", "+")
    git_dir = clone / "repo" if (clone / "repo").is_dir() else clone
    where = ["--git-dir", str(git_dir)] if (git_dir / "HEAD").is_file() else ["-C", str(git_dir)]
    return subprocess.run(["git", *where, *command], capture_output=True)


def show(sources: Path, entry: Entry, path: Optional[str] = None) -> bytes:
    """The file at the entry's commit, from the clone SOURCES/owner+name."""
    done = _git(sources, entry, "show", f"{entry.commit}:{path or entry.path}")
    if done.returncode:
        raise SystemExit(f"{entry.repo}@{entry.commit} {path or entry.path}: "
                         f"{done.stderr.decode().strip()}")
    return done.stdout


def build(sources: Path, cache: Path) -> list[Entry]:
    """Write the adapted corpus into `cache` (emptied first)."""
    if cache.resolve().is_relative_to(ROOT):
        raise SystemExit(f"{cache}: the corpus is kept outside the repository")
    if cache.exists():
        shutil.rmtree(cache)
    (cache / "input_data").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "input_data.py", cache / "input_data" / "__init__.py")
    entries = read_manifest()
    for entry in entries:
        text = show(sources, entry).decode("utf-8", errors="replace")
        (cache / f"{entry.cache_name}.py").write_text(adapt(text))
        _helpers(sources, entry, text, cache)
    return entries


_IMPORT = re.compile(r"^\s*(?:from\s+(\w+)\s+import|import\s+(\w+))", re.M)
_DATA = re.compile(r"""['"]([\w-]+(?:/[\w.-]+)*\.(?:csv|txt|dat|tsv|json|npy|npz|data))['"]""")


def _tree(sources: Path, entry: Entry) -> set[str]:
    """Every file path of the entry's repository at its commit."""
    listing = _git(sources, entry, "ls-tree", "-r", "--name-only", entry.commit)
    return set(listing.stdout.decode().split("\n"))


def _helpers(sources: Path, entry: Entry, text: str, cache: Path) -> None:
    """The helpers a program imports from its own repository: the `libs` package (pkmital's
    tutorials), and a module beside the program (`from siamese_similarity_model import ...`),
    written as a package of that name so that the check does not run it as a program."""
    folder = Path(entry.path).parent
    tree = f"{entry.commit}:{folder}" if str(folder) != "." else entry.commit
    beside = _git(sources, entry, "ls-tree", "--name-only", tree)
    modules = {Path(n).stem for n in beside.stdout.decode().split() if n.endswith(".py")}
    for match in _IMPORT.finditer(text):
        name = match[1] or match[2]
        if name in modules and name != Path(entry.path).stem and not (cache / name).exists():
            (cache / name).mkdir()
            data = show(sources, entry, str(folder / f"{name}.py")).decode("utf-8", errors="replace")
            (cache / name / "__init__.py").write_text(adapt(data))
    for name in sorted(set(_DATA.findall(text))):
        target = cache / name
        if str(folder / name) in _tree(sources, entry) and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(show(sources, entry, str(folder / name)))
    if re.search(r"^\s*from libs", text, re.M) and not (cache / "libs").exists():
        folder = str(Path(entry.path).parent / "libs")
        listing = _git(sources, entry, "ls-tree", "--name-only", f"{entry.commit}:{folder}")
        (cache / "libs").mkdir()
        for name in listing.stdout.decode().split():
            if name.endswith(".py"):
                data = show(sources, entry, f"{folder}/{name}").decode()
                (cache / "libs" / name).write_text(adapt(data))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", type=Path, help="one git clone per repository: owner+name")
    parser.add_argument("cache", type=Path, help="the folder to (re)build, outside the repository")
    args = parser.parse_args(argv)
    entries = build(args.sources, args.cache)
    repos = {e.repo for e in entries}
    print(f"{len(entries)} programs from {len(repos)} repositories written to {args.cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
