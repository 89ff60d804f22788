""".ci/slim-venv, which the Dockerfile's build stage runs on the image's venv, on a small venv laid out like the
real one: what it removes, what it ships as sourceless -OO bytecode, and that everything still imports. (On the
locked dependencies it takes the venv from 385 MB to 140 MB: docs/release.md.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = '"""A docstring that -OO drops."""\nVALUE = 1\n'


def test_slim_venv_removes_what_never_runs_and_compiles_the_rest(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    files = {
        "kubernetes/__init__.py": DOC,
        "kubernetes/client/__init__.py": DOC,
        "kubernetes/aio/__init__.py": DOC,
        "kubernetes/watch/watch_test.py": DOC,
        "google/cloud/compute_v1/__init__.py": DOC,
        "azure/mgmt/compute/__init__.py": DOC,
        "botocore/__init__.py": DOC,
        "botocore/data/ec2/2016-11-15/service-2.json.gz": "",
        "botocore/data/sts/2011-06-15/service-2.json.gz": "",
        "botocore/data/s3/2006-03-01/service-2.json.gz": "",
        "botocore/data/endpoints.json": "{}",
        "jobs/__init__.py": DOC,
        "jobs/tests/__init__.py": DOC,
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)

    subprocess.run(["bash", str(ROOT / ".ci/slim-venv"), str(venv)], check=True, timeout=120)

    gone = ["kubernetes/aio", "kubernetes/watch/watch_test.py", "jobs/tests", "botocore/data/s3"]
    assert [name for name in gone if (site / name).exists()] == []
    kept = ["botocore/data/ec2", "botocore/data/sts", "botocore/data/endpoints.json", "jobs/__init__.py"]
    kept += ["botocore/__init__.pyc"]  # another dependency: sourceless, compiled as it is
    assert [name for name in kept if not (site / name).exists()] == []
    # Generated SDK clients: sourceless bytecode, next to where the source was.
    for package in ("kubernetes", "kubernetes/client", "google/cloud/compute_v1", "azure/mgmt/compute"):
        assert not (site / package / "__init__.py").exists()
        assert (site / package / "__init__.pyc").is_file()
    assert not (site / "botocore/__init__.py").exists()
    # gpu-jobs alone keeps its source, with its bytecode compiled beside it.
    assert list((site / "jobs" / "__pycache__").glob("__init__.cpython-*.pyc"))
    assert not (site / "jobs/__init__.pyc").exists()
    imported = subprocess.run(
        [str(python), "-c", "import kubernetes, kubernetes.client, google.cloud.compute_v1, botocore, jobs;"
         "print(kubernetes.__doc__, kubernetes.VALUE, botocore.__doc__ is not None, jobs.__doc__ is not None)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    # -OO: the generated clients' docstrings are gone; the other dependencies' and ours are kept.
    assert imported.stdout.split() == ["None", "1", "True", "True"]
