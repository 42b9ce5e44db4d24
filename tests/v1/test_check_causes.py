"""`python -m opsdk.v1.check` says whose each failure is: opsdk.v1's, or the program's or its
environment's (docs/tf1.md, "Measured on public programs")."""

from __future__ import annotations

from pathlib import Path

import opsdk
from opsdk.v1.check import Outcome, causes_summary, check_folder, main
from opsdk.v1.check_causes import cause_of

OPSDK = Path(opsdk.__file__).resolve().parent


def _traceback(*frames: tuple[str, int], last: str) -> str:
    body = "".join(f'  File "{path}", line {n}, in f\n    x\n' for path, n in frames)
    return f"Traceback (most recent call last):\n{body}{last}\n"


def test_a_failure_in_a_library_the_program_called_is_the_programs(tmp_path):
    stderr = _traceback((tmp_path / "p.py", 3), ("/usr/lib/numpy/_core/fromnumeric.py", 9),
                        last="TypeError: reshape() got an unexpected keyword argument 'newshape'")
    assert cause_of(stderr, tmp_path).kind == "program"


def test_a_failure_inside_opsdk_is_opsdks_even_when_a_library_raised_it(tmp_path):
    stderr = _traceback((tmp_path / "p.py", 3), (OPSDK / "v1" / "nn.py", 10),
                        ("/usr/lib/numpy/_core/fromnumeric.py", 9), last="ValueError: bad")
    assert cause_of(stderr, tmp_path).kind == "framework"
    refused = _traceback((tmp_path / "p.py", 3), (OPSDK / "v1" / "nn.py", 10),
                         last="opsdk.registry.errors.OpsdkError: conv2d: argument 'x' ...")
    assert cause_of(refused, tmp_path).kind == "refused"


def test_a_program_function_called_back_by_opsdk_decides_for_itself(tmp_path):
    stderr = _traceback((tmp_path / "p.py", 3), (OPSDK / "v1" / "misc.py", 10),
                        (tmp_path / "libs" / "helpers.py", 5), last="KeyError: 'w'")
    assert cause_of(stderr, tmp_path).kind == "program"


def test_a_missing_package_names_what_to_install(tmp_path):
    stderr = _traceback((tmp_path / "p.py", 124), last="ModuleNotFoundError: No module named "
                                                       "'skimage'")
    cause = cause_of(stderr, tmp_path)
    assert cause.kind == "environment" and "pip install scikit-image" in cause.text
    missing_tf = _traceback((tmp_path / "p.py", 1), last="ModuleNotFoundError: No module named "
                                                         "'tensorflow.contrib.slim'")
    assert cause_of(missing_tf, tmp_path).kind != "environment"  # the framework's to provide


def test_a_module_of_tensorflow_that_opsdk_lacks_is_refused_by_opsdk_not_the_programs(tmp_path):
    # Python's own words when `tensorflow.python` is a plain module, and opsdk.v1's finder's
    for last in ("ModuleNotFoundError: No module named 'tensorflow.python.framework'; "
                 "'tensorflow.python' is not a package",
                 "ModuleNotFoundError: No module named 'tensorflow.python.ops.lookup_ops': "
                 "opsdk.v1 answers only these modules of TensorFlow's tensorflow.python: ..."):
        cause = cause_of(_traceback((tmp_path / "p.py", 11), last=last), tmp_path)
        assert cause.kind == "refused", last
        assert "tensorflow.python." in cause.text


def test_the_cause_of_a_chained_exception_is_read_from_the_last_traceback(tmp_path):
    first = _traceback((OPSDK / "v1" / "nn.py", 10), last="KeyError: 'x'")
    second = _traceback((tmp_path / "p.py", 7), last="FileNotFoundError: [Errno 2] No such "
                                                     "file or directory: 'samples/000.png'")
    chained = f"{first}\nDuring handling of the above exception, another exception occurred:\n\n{second}"
    assert cause_of(chained, tmp_path).kind == "environment"


def test_the_check_reports_causes_and_the_programs_line_in_a_folder_named_opsdk(tmp_path, capsys):
    folder = tmp_path / "opsdk-corpus"  # the cache's usual name: its lines are the program's
    folder.mkdir()
    (folder / "a_numpy.py").write_text("import numpy as np\nimport tensorflow as tf\n"
                                       "np.reshape(np.zeros(4), newshape=(2, 2))\n")
    (folder / "b_folder.py").write_text("import tensorflow as tf\n\n"
                                        "open('samples/000.png', 'wb')\n")
    (folder / "c_package.py").write_text("import tensorflow as tf\nimport no_such_package_here\n")
    (folder / "d_missing.py").write_text("import tensorflow as tf\ntf.no_such_function(3)\n")
    outcomes = {o.program: o for o in check_folder(folder, timeout=120, jobs=2)}
    kinds = {name: o.cause.kind for name, o in outcomes.items()}
    assert kinds == {"a_numpy.py": "program", "b_folder.py": "environment",
                     "c_package.py": "environment", "d_missing.py": "refused"}
    assert 'a_numpy.py", line 3' in outcomes["a_numpy.py"].failure
    assert 'b_folder.py", line 3' in outcomes["b_folder.py"].failure
    assert main([str(folder), "--timeout", "120", "--jobs", "2", "--opsdk-only"]) == 1
    out = capsys.readouterr().out
    assert "cause: the program's: raised in its own code" in out
    assert ("0 of 4 programs ran; of the 4 others: 1 refused by opsdk.v1, 1 the programs' own, "
            "2 the environment's") in out


def test_the_summary_is_empty_when_every_program_ran():
    assert causes_summary([Outcome("p.py", True, 1.0)]) == ""


def test_a_linked_program_is_blamed_where_it_lives(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "real" / "p.py").write_text("import tensorflow as tf\n\nraise KeyError('w')\n")
    (tmp_path / "linked" / "p.py").symlink_to(tmp_path / "real" / "p.py")
    [outcome] = check_folder(tmp_path / "linked", timeout=120)
    assert outcome.cause.kind == "program" and 'p.py", line 3' in outcome.failure
