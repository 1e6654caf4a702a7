"""The distributed example binds the tenant to the workflow's namespace, never to its input.

Flux authorizes callers by namespace and workflow (``workflow:kb-acme:*:run``), not by input
values, so a served workflow must not read the tenant from ``ctx.input``. The example's
``register_for`` writes one copy per tenant; the template itself refuses to run.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from flux_chroma.errors import TenantError

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "distributed" / "workflows.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kb_workflows_example", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Flux finds a workflow's source through its module
    spec.loader.exec_module(module)
    return module


def test_the_template_refuses_to_run_whatever_tenant_the_input_names(url: str) -> None:
    example = load_example()
    run = example.ask.run({"tenant": "acme", "question": "what is the refund policy?"})
    assert run.has_failed
    error = run.output
    while not isinstance(error, TenantError) and getattr(error, "inner_exception", None) is not None:
        error = error.inner_exception
    assert isinstance(error, TenantError), repr(run.output)
    assert "register_for" in str(error)


def test_register_for_binds_each_copy_to_one_tenant(tmp_path: Path) -> None:
    example = load_example()
    copy = example.register_for("acme", tmp_path / "kb-acme.py")
    namespaces = {
        kw.value.value
        for node in ast.walk(ast.parse(copy.read_text()))
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "namespace" and isinstance(kw.value, ast.Constant)
    }
    assert namespaces == {"kb-acme"}
    assert 'ctx.input["tenant"]' not in EXAMPLE.read_text() and "ctx.input.get(\"tenant\"" not in EXAMPLE.read_text()


@pytest.mark.parametrize("tenant", ["Acme", "a", "acme--eu", "../x"], ids=["upper", "short", "double-hyphen", "path"])
def test_register_for_rejects_a_bad_tenant_id(tenant: str, tmp_path: Path) -> None:
    with pytest.raises(TenantError, match="invalid"):
        load_example().register_for(tenant, tmp_path / "x.py")
