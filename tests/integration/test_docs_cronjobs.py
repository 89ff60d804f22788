"""What the README and the docs say about the CronJobs is what ``kubectl kustomize kustomize/base`` renders: every
``cronjob/<name>`` they mention, the job tables (no job with a CronJob called planned), the CronJob table of
docs/deploying.md (command, schedule, suspended, dry run) and its RBAC table, grant by grant."""

from __future__ import annotations

import re

import pytest

from tests.docs import ROOT, code_spans, pages, tables
from tests.integration.test_deploy import Obj, bound_roles, container, env, granted, named, pod_spec, render

pytestmark = pytest.mark.integration

#: Words that say a job is not there yet.
NOT_YET = re.compile(r"\b(planned|coming|to come|upcoming|not yet available|roadmap)\b", re.I)


def cronjobs() -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in render("base") if o["kind"] == "CronJob"}


def table_with(page: str, first: str, *columns: str) -> list[dict[str, str]]:
    found = [t for t in tables(page) if t and next(iter(t[0])) == first and all(c in t[0] for c in columns)]
    assert len(found) == 1, f"{page}: expected one table with the columns {first}, {', '.join(columns)}"
    return found[0]


def test_every_cronjob_the_docs_name_is_in_the_rendered_base() -> None:
    rendered = set(cronjobs())
    assert rendered == {"nodegroups", "quotas", "cloud-quotas", "sweep-pods", "sweep-instances"}
    for page in pages():
        text = (ROOT / page).read_text()
        for match in re.finditer(r"cronjob/([A-Za-z0-9._-]+)", text):
            line = text.count("\n", 0, match.start()) + 1
            assert match.group(1) in rendered, f"{page}:{line}: cronjob/{match.group(1)} is not a CronJob of the base"
        for cell in (c for t in tables(page) for row in t for h, c in row.items() if h == "CronJob"):
            for name in code_spans(cell):
                assert name in rendered, f"{page}: the table's CronJob `{name}` is not a CronJob of the base"


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_job_table_lists_every_cronjob_and_calls_none_planned(page: str) -> None:
    rows = table_with(page, "job", "CronJob")
    named_cronjobs = [name for row in rows for name in code_spans(row["CronJob"])]
    assert sorted(named_cronjobs) == sorted(cronjobs())  # each once
    for row in rows:
        if code_spans(row["CronJob"]):
            assert not NOT_YET.search(" ".join(row.values())), f"{page}: {row}"
            assert row.get("status", "ready") == "ready", f"{page}: {row}"


def test_no_page_calls_a_job_that_has_a_cronjob_planned_or_coming() -> None:
    jobs = set(cronjobs()) | {"sweep"}  # the sweep's two parts are one job
    for page in pages():
        text = re.sub(
            r"`[^`]*`", lambda m: m.group(0) if m.group(0).strip("`") in jobs else "``", (ROOT / page).read_text()
        )
        for sentence in re.split(r"(?<=[.:;|])\s", text):
            names = {n for n in code_spans(sentence) if n in jobs}
            if names and (found := NOT_YET.search(sentence)):
                pytest.fail(f"{page}: {sorted(names)} called {found.group(0)!r}: {sentence.strip()[:200]}")


def test_the_deploying_cronjob_table_is_the_rendered_base() -> None:
    rendered = cronjobs()
    rows = table_with("docs/deploying.md", "CronJob", "command", "schedule (UTC)", "in the base")
    assert sorted(code_spans(r["CronJob"])[0] for r in rows) == sorted(rendered)  # each once
    objects = render("base")
    for row in rows:
        (name,) = code_spans(row["CronJob"])
        (command,) = code_spans(row["command"])
        cronjob = rendered[name]
        assert command.split() == ["gpu-jobs", *container(objects, name)["args"]], name
        assert code_spans(row["schedule (UTC)"])[0] == cronjob["spec"]["schedule"], name
        assert ("suspended" in row["in the base"]) is bool(cronjob["spec"].get("suspend")), name
        assert ("dry run" in row["in the base"]) is (env(objects, name).get("GPU_JOBS_DRY_RUN") == "true"), name
        assert pod_spec(objects, name)["serviceAccountName"] == f"gpu-jobs-{name}", name


def test_the_deploying_rbac_table_is_each_cronjobs_bound_roles_grant_by_grant() -> None:
    objects = render("base")
    rows = table_with("docs/deploying.md", "CronJob", "cluster-wide (ClusterRole)")
    assert {code_spans(r["CronJob"])[0] for r in rows} == set(cronjobs())
    role_column = next(h for h in rows[0] if h.endswith("(Role)"))
    for row in rows:
        (name,) = code_spans(row["CronJob"])
        account = named(objects, "ServiceAccount", f"gpu-jobs-{name}")["metadata"]["name"]
        for column, binding in (("cluster-wide (ClusterRole)", "ClusterRoleBinding"), (role_column, "RoleBinding")):
            documented = grants(row[column])
            actual = {
                resource: verbs for (_, resource), verbs in granted(bound_roles(objects, account, binding)).items()
            }
            assert documented == actual, f"{name}, {column}"


def grants(cell: str) -> dict[str, set[str]]:
    """``\\`pods\\`: list, get; \\`events\\`: create`` as {resource: verbs}; ``(none)`` as {}."""
    found: dict[str, set[str]] = {}
    for part in filter(None, (p.strip() for p in cell.split(";"))):
        if part == "(none)":
            continue
        resource, verbs = part.split(":", 1)
        (name,) = code_spans(resource)
        found[name] = {v.strip() for v in verbs.split(",")}
    return found
