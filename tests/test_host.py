"""Host-code checking (`mimir.host`): fixtures under `tests/fixtures/host/` with `# E:` markers.

Each fixture's diagnostics must equal its markers exactly (a missing and an unexpected
diagnostic both fail), as for kernel fixtures. The unit tests below pin what a marker
cannot: messages, counterexamples, and what stays unknown instead of becoming an error.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from support import REPO, markers

from mimir.check import FileResult, check_source
from mimir.diagnostics.codes import REGISTRY
from mimir.host import check_host
from mimir.host.symbolic import NEVER
from mimir.parse.module import read_module
from mimir.parse.spans import SourceFile

HOST_FIXTURES = sorted((REPO / "tests" / "fixtures" / "host").glob("*.py"))


@functools.cache
def _checked(path: Path) -> FileResult:
    return check_source(str(path), path.read_text())


@pytest.mark.parametrize("path", HOST_FIXTURES, ids=[p.name for p in HOST_FIXTURES])
def test_host_fixture_diagnostics_match_markers(path: Path) -> None:
    text = path.read_text()
    got = {(d.span.line, d.code) for d in _checked(path).diagnostics}
    want = markers(text)
    lines = text.splitlines()
    missing = [f"{ln}: {code}  | {lines[ln - 1].strip()}" for ln, code in sorted(want - got)]
    unexpected = [
        f"{d.span.line}:{d.span.column}: {d.code} {d.message}"
        for d in _checked(path).diagnostics
        if (d.span.line, d.code) not in want
    ]
    assert not missing and not unexpected, f"missing: {missing}\nunexpected: {unexpected}"


@pytest.mark.parametrize("path", HOST_FIXTURES, ids=[p.name for p in HOST_FIXTURES])
def test_host_diagnostics_are_well_formed(path: Path) -> None:
    for d in _checked(path).diagnostics:
        assert d.code in REGISTRY and d.severity == REGISTRY[d.code].severity
        assert d.message and not d.message.endswith(".") and not d.message[0].isupper()
        assert d.span.line >= 1 and d.span.column >= 1


def _host(src: str):
    import ast

    return check_host(read_module(SourceFile("t.py", src), ast.parse(src)))


def _messages(src: str) -> list[tuple[int, str, str]]:
    return [(d.span.line, d.code, d.message) for d in _host(src).diagnostics]


def test_kernel_call_names_both_arguments_and_sizes() -> None:
    (d,) = [
        d
        for d in _checked(REPO / "tests/fixtures/host/kernel_calls.py").diagnostics
        if d.span.line == 52
    ]
    assert d.message == (
        "`N` is 32 from argument `x` [32, 784] but 64 from argument `y` [64] in the call of `pair`"
    )


def test_symbolic_batch_gets_a_counterexample() -> None:
    src = (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "X = torch.randn(100, 3)\nY = torch.randint(0, 3, (100,))\n"
        "for xb, yb in DataLoader(TensorDataset(X, Y), batch_size=32):\n"
        "    z = xb.view(-1, 96)\n"
    )
    (d,) = _host(src).diagnostics
    assert d.code == "GPU013" and d.span.line == 6
    # 100 = 3 * 32 + 4: full batches hold 96 values, the last one 12.
    assert dict(d.counterexample) == {"batch": 4}


def test_broadcast_that_works_only_where_a_size_is_one_names_those_sizes() -> None:
    src = (
        "import torch\n"
        "def f(x):\n"
        "    b, t = x.shape\n"
        "    pos = torch.arange(1, t)\n"
        "    return x + pos\n"
    )
    (d,) = _host(src).diagnostics
    assert d.code == "GPU010" and d.span.line == 5
    assert dict(d.counterexample) == {"t": 3}
    assert d.why.endswith("(it works only at t = 1 or 2, where one side is 1 by coincidence)")


def test_broadcast_against_a_size_the_code_made_one_is_silent() -> None:
    src = (
        "import torch\n"
        "def f(x):\n"
        "    b, t = x.shape\n"
        "    if t == 2:\n"
        "        return x + torch.arange(1, t)\n"
    )
    assert _host(src).diagnostics == []


def test_data_loader_batches_are_exact() -> None:
    src = (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "X = torch.randn(96, 8)\nY = torch.randint(0, 3, (96,))\n"
        "for xb, yb in DataLoader(TensorDataset(X, Y), batch_size=32):\n"
        "    z = xb.view(-1, 16)\n    w = xb.view(-1, 512)\n"
    )
    assert [(ln, c) for ln, c, _ in _messages(src)] == [(7, "GPU013")]


@pytest.mark.parametrize(
    "src",
    [
        # unknown calls, unknown libraries, unknown attributes give unknown shapes
        "import torch\nimport foo\nx = foo.make()\ny = x @ torch.randn(3, 4)\n",
        "import torch\nx = torch.randn(3, 4)\ny = x.frobnicate()\nz = y @ torch.randn(5, 6)\n",
        # a branch whose sides disagree leaves the size unknown
        "import torch\nimport sys\nn = 3 if sys.argv else 4\nx = torch.randn(n, 4)\n"
        "y = x.view(3, 4)\n",
        # a loop run an unknown number of times that grows a tensor widens instead of unrolling
        "import sys\nimport torch\nx = torch.randn(1, 4)\nfor _ in range(len(sys.argv)):\n"
        "    x = torch.cat([x, torch.randn(1, 4)], 0)\ny = x.view(2, -1, 4)\n",
        # squeeze of a symbolic size is left unknown (torch squeezes only size 1)
        "import torch\ndef f(n: int):\n"
        "    return torch.randn(n, 1).squeeze(0) @ torch.randn(3, 1)\n",
    ],
)
def test_unknown_is_never_an_error(src: str) -> None:
    assert _messages(src) == []


def test_numpy_sorts_keep_their_own_meaning() -> None:
    """`np.sort` gives the array (flattened with `axis=None`), `ndarray.sort()` sorts in
    place and gives None, `argsort` keeps the shape; only the real mismatch is reported."""
    src = (
        "import numpy as np\n"
        "a = np.zeros((4, 5))\n"
        "s = np.sort(a, axis=0) + np.zeros((4, 5))\n"
        "f = np.sort(a, axis=None) + np.zeros(20)\n"
        "i = a.argsort() + np.zeros((4, 5))\n"
        "n = a.sort()\n"
        "bad = np.sort(a) + np.zeros(20)\n"
    )
    found = check_source("sorts.py", src).diagnostics
    assert [(d.span.line, d.code) for d in found] == [(7, "GPU010")]


def test_loop_over_a_literal_range_is_unrolled() -> None:
    src = (
        "import torch\nx = torch.randn(1, 4)\nfor _ in range(10):\n"
        "    x = torch.cat([x, torch.randn(1, 4)], 0)\ny = x.view(2, -1, 4)\nz = x.view(11, 4)\n"
    )
    ((line, code, message),) = _messages(src)
    assert (line, code) == (5, "GPU013") and "44 is not a multiple of 8" in message


def test_loop_over_module_list_is_exact() -> None:
    src = (
        "import torch\nimport torch.nn as nn\n"
        "layers = nn.ModuleList([nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(4, 2)])\n"
        "x = torch.randn(3, 4)\nfor layer in layers:\n    x = layer(x)\n"
    )
    ((line, code, message),) = _messages(src)
    assert (line, code) == (6, "GPU100")
    assert "expects 4 input features, got [3, 8]" in message


def test_helper_is_summarised_per_call() -> None:
    src = (
        "import torch\ndef head(x, k):\n    return x @ torch.randn(k, 2)\n"
        "a = head(torch.randn(5, 3), 3)\nb = head(torch.randn(5, 7), 7)\nc = head(a, 3)\n"
    )
    ((line, code, message),) = _messages(src)
    assert (line, code) == (3, "GPU011") and "[5, 2] @ [3, 2]" in message


def test_hover_shapes_are_recorded() -> None:
    src = "import torch\nx = torch.randn(4, 3)\ny = x.unsqueeze(0)\n"
    assert _host(src).shapes == {(2, 1): "[4, 3]", (3, 1): "[1, 4, 3]"}


@pytest.mark.parametrize(
    "name",
    [
        "torch_layers.py",
        "torch_table_reach.py",
        "stated_inputs.py",
        "model_idioms.py",
        "size_one_coincidence.py",
        "doomed_by_two_demands.py",
        "doomed_stack.py",
    ],
)
def test_torch_layer_fixture_agrees_with_pytorch(name: str) -> None:
    """Each `case_*` of the fixture raises under CPU PyTorch exactly at its error marker,
    and warns (a UserWarning from PyTorch) exactly at its warning marker."""
    import runpy
    import traceback
    import warnings

    path = REPO / "tests" / "fixtures" / "host" / name
    marks = markers(path.read_text())
    errors = {line for line, code in marks if REGISTRY[code].severity == "error"}
    warned_at = {line for line, code in marks if REGISTRY[code].severity == "warning"}
    namespace = runpy.run_path(str(path))
    raised, warned = set(), set()
    for name, case in namespace.items():
        if not name.startswith("case_"):
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                case()
            except Exception as err:  # noqa: BLE001 - every crash is what is measured
                frames = traceback.extract_tb(err.__traceback__)
                raised.add([f.lineno for f in frames if f.filename == str(path)][-1])
        if any(  # the loss-broadcast warning, not PyTorch's notes on its own kernels
            issubclass(w.category, UserWarning) and "target size" in str(w.message) for w in caught
        ):
            warned.add(name)
    assert raised == errors
    tree = ast.parse(path.read_text())
    cases_with_warning_markers = {
        fn.name
        for fn in tree.body
        if isinstance(fn, ast.FunctionDef)
        and any(fn.lineno <= line <= (fn.end_lineno or fn.lineno) for line in warned_at)
    }
    assert warned == cases_with_warning_markers
    assert warned or name != "torch_layers.py"


def test_symbolic_sizes_show_the_shapes_of_the_counterexample() -> None:
    diags = _checked(REPO / "tests/fixtures/host/symbolic_lenet.py").diagnostics
    view = next(d for d in diags if d.code == "GPU013")
    cex = dict(view.counterexample)
    b, h = cex["B"], cex["H"]
    side = ((h - 4) // 2 - 4) // 2  # what two conv/pool stages leave of H
    assert 28 <= h <= 64 and (b * 16 * side * side) % 400 != 0
    assert view.why.endswith(f"counterexample: B={b}, H={h} (then [{b}, 16, {side}, {side}])")
    assert "((H - 4)//2 - 4)//2" in view.message  # the exact conv/pool floor formulas


def test_layer_errors_point_at_the_layer_definition() -> None:
    diags = _checked(REPO / "tests/fixtures/host/symbolic_lenet.py").diagnostics
    linear = next(d for d in diags if d.code == "GPU100")
    assert (
        linear.message
        == "`nn.Linear(width, 10)` expects 64 input features, got [2, 32] (32 features)"
    )
    assert [(lab.span.line, lab.message) for lab in linear.labels] == [
        (39, "`nn.Linear(width, 10)` is built here")
    ]


@pytest.mark.parametrize(
    ("src", "want"),
    [
        # in-place methods change the receiver: no stale shape afterwards
        ("import torch\nx = torch.randn(3, 4)\nx.unsqueeze_(0)\ny = x.view(1, 12)\n", []),
        ("import torch\nx = torch.randn(3, 4)\nx.unsqueeze_(0)\ny = x.view(12, 2)\n", [4]),
        ("import numpy as np\na = np.zeros((3, 4))\na.shape = (4, 3)\nb = a @ np.ones((3,))\n", []),
        ("import torch\nx = torch.randn(3, 4)\nx.add_(1)\ny = x @ torch.randn(5, 2)\n", [4]),
    ],
)
def test_in_place_changes_are_followed(src: str, want: list[int]) -> None:
    assert [line for line, _, _ in _messages(src)] == want


def test_symbolic_kernel_composition_is_proven_or_refuted_with_a_counterexample() -> None:
    diags = _checked(REPO / "tests/fixtures/host/kernel_calls.py").diagnostics
    (d,) = [d for d in diags if d.span.line == 89]
    assert d.code == "GPU040"
    # M is a multiple of 4 (its Dim says so): the counterexample respects it.
    cex = dict(d.counterexample)
    assert set(cex) == {"N", "M"} and cex["N"] != cex["M"] and cex["M"] % 4 == 0
    assert not [d for d in diags if d.span.line == 84]  # head(project(scale(x), w)) proven


@pytest.mark.parametrize(
    ("src", "want"),
    [
        (
            "import torch\nimport torch.nn as nn\n"
            "layers = nn.ModuleList([nn.Linear(4, 8), nn.Linear(8, 3)])\n"
            "x = torch.randn(2, 4)\ny = layers[1](layers[0](x))\nz = layers[1](x)\n",
            [(6, "GPU100")],
        ),
        (
            "import torch\nimport torch.nn as nn\n"
            "net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))\n"
            "y = net[2](net[0](torch.randn(2, 4)))\nz = net[-1](torch.randn(2, 4))\n",
            [(5, "GPU100")],
        ),
        (
            "import torch\nimport torch.nn as nn\n"
            "up = nn.Unflatten(1, (16, 7, 7))\ny = up(torch.randn(2, 784))\n"
            "z = up(torch.randn(2, 700))\n",
            [(5, "GPU013")],
        ),
    ],
)
def test_modules_indexed_by_a_constant(src: str, want: list) -> None:
    assert [(line, code) for line, code, _ in _messages(src)] == want


@pytest.mark.parametrize(
    "src",
    [
        # a ModuleList filled by append: its layers are not known, so nothing is claimed
        "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList()\n"
        "        self.layers.append(nn.Linear(4, 8))\n        self.out = nn.Linear(8, 2)\n"
        "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n"
        "        return self.out(x)\nM()(torch.randn(3, 4))\n",
        # built by a comprehension whose sizes change
        "import torch\nimport torch.nn as nn\n"
        "layers = nn.ModuleList([nn.Linear(4 if i == 0 else 8, 8) for i in range(3)])\n"
        "x = torch.randn(2, 4)\nfor layer in layers:\n    x = layer(x)\ny = nn.Linear(8, 1)(x)\n",
        # a Python list of layers extended in a loop
        "import torch\nimport torch.nn as nn\nmods = [nn.Linear(4, 8)]\nfor _ in range(2):\n"
        "    mods.append(nn.Linear(8, 8))\nx = torch.randn(2, 4)\nfor m in mods:\n    x = m(x)\n"
        "y = nn.Linear(8, 1)(x)\n",
    ],
)
def test_containers_filled_at_run_time_are_unknown(src: str) -> None:
    assert _messages(src) == []


@pytest.mark.parametrize(
    "src",
    [
        # a structured array's field: not an index
        "import numpy as np\na = np.zeros((6,), dtype=[('a', 'f4', (3,))])\nb = a[0]['a']\n",
        # matmul with `axes=`, and np.dot's own rule for N-d operands
        "import numpy as np\na = np.zeros((3, 4, 5))\n"
        "c = np.matmul(a, a, axes=[(-2, -1), (-1, -2), (1, 2)])\n",
        "import numpy as np\nc = np.dot(np.zeros((3, 4, 5)), np.zeros((2, 5, 6)))\n"
        "d = c.reshape(144)\n",
        # numpy and torch differ: split points, element repeat, dtype and `unbiased` positionals
        "import numpy as np\nx = np.zeros((4, 6))\na, b = np.split(x, [1], axis=0)\n"
        "c = x.repeat(3)\nd = x.std(0, np.float64)\ne = np.array(1.0, ndmin=2)[0]\n",
        "import torch\nt = torch.randn(4, 6)\nf = t.std(0, True).view(6)\n"
        "g = t.norm(2, 1).view(4)\nh = t.sum(1, True).view(4, 1)\n",
        # a list that something else may have grown: unpacking is not judged
        "def f(parts):\n    value = [parts]\n    grow(value)\n    a, b = value\n    return a\n",
        # a ratio read as a size is a float: an assert on it is not judged (vit-pytorch)
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, ratio):\n"
        "        super().__init__()\n        assert ratio > 0 and ratio < 1\n",
        # an int default met with a flag explored both ways (timm's scheduler factory)
        "def make(epochs: int = 300, per_epoch: bool = True, updates: int = 0):\n"
        "    if not per_epoch:\n        assert updates > 0\n        epochs = epochs * updates\n"
        "    return epochs\n",
        # a default that the class's own assert refuses is no configuration (timm's twins)
        "import torch.nn as nn\nclass A(nn.Module):\n"
        "    def __init__(self, dim: int, ws: int = 1):\n"
        "        assert ws != 1\n        super().__init__()\n        self.ws = ws\n",
        # a flag read from a tuple the interpreter lost: either branch may never run
        "import torch.nn as nn\nclass S(nn.Module):\n"
        "    def __init__(self, dim: int = 48, dim_out: int = 96, flags=None):\n"
        "        super().__init__()\n        flags = flags or (False,) + (True,) * 3\n"
        "        if flags[1]:\n            self.down = nn.Linear(dim, dim_out)\n"
        "        else:\n            assert dim == dim_out\n",
        # a dispatch on the rank of a tensor whose rank is unknown (diffusers' rotary embed)
        "import torch.nn as nn\nclass R(nn.Module):\n    def __init__(self, patch=(2, 2)):\n"
        "        super().__init__()\n        self.patch = patch\n    def forward(self, x):\n"
        "        if x.ndim == 5:\n            a, b, c = self.patch\n"
        "        else:\n            a, b = self.patch\n        return x\n",
        # a class over `nn.Sequential` whose layers are added after `super().__init__()`
        # (timm's ConvNorm, torchvision's _Transition) is no empty sequence
        "import torch.nn as nn\nclass CN(nn.Sequential):\n    def __init__(self, a, b):\n"
        "        super().__init__()\n        self.add_module('c', nn.Conv2d(a, b, 1))\n"
        "class T(nn.Sequential):\n    def __init__(self, a, b):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(a, b, 1)\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.s = nn.Conv2d(3, 3, 1)\n        self.a = CN(3, 8)\n        self.b = T(3, 8)\n"
        "        self.n = nn.Linear(8, 4)\n"
        "    def forward(self, x):\n        x = self.s(x)\n"
        "        return self.n(self.a(x).mean((2, 3))) + self.n(self.b(x).mean((2, 3)))\n",
        # a placeholder __init__ sets that another method computes before this one reads it
        # (torchvision's RAFT `corr_pyramid`, timm's ConViT `rel_indices`)
        "import torch\nimport torch.nn as nn\nclass C(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.pyramid = [torch.tensor(0)]\n"
        "    def build(self, a, b):\n        self.pyramid = [a @ b]\n"
        "    def index(self):\n        for v in self.pyramid:\n            h, w = v.shape[-2:]\n",
    ],
)
def test_found_in_the_wild_without_alarm(src: str) -> None:
    assert _messages(src) == []


@pytest.mark.parametrize(
    ("src", "want"),
    [
        (
            "import torch\ntry:\n    y = torch.randn(2, 3) @ torch.randn(4, 5)\n"
            "except RuntimeError:\n    y = None\n",
            [],
        ),
        (
            "import pytest\nimport torch\ndef test_it():\n    with pytest.raises(RuntimeError):\n"
            "        torch.randn(2, 3) @ torch.randn(4, 5)\n",
            [],
        ),
        (
            "import torch\ntry:\n    y = torch.randn(2, 3)\n"
            "finally:\n    z = y @ torch.randn(4, 5)\n",
            [5],
        ),
    ],
)
def test_expected_errors_are_not_reported(src: str, want: list[int]) -> None:
    assert [line for line, _, _ in _messages(src)] == want


def test_multihead_attention_and_list_comprehensions() -> None:
    src = (
        "import torch\nimport torch.nn as nn\n"
        "attn = nn.MultiheadAttention(32, 4, batch_first=True)\n"
        "x = torch.randn(2, 10, 32)\nout, w = attn(x, x, x)\ny = out.reshape(2, 320)\n"
        "layers = nn.ModuleList([nn.Linear(8 if i == 0 else 16, 16) for i in range(3)])\n"
        "h = torch.randn(5, 8)\nfor layer in layers:\n    h = layer(h)\nz = h.view(5, 16)\n"
        "bad = attn(torch.randn(2, 10, 16), x, x)\nworse = h.view(5, 15)\n"
    )
    assert [(line, code) for line, code, _ in _messages(src)] == [(12, "GPU100"), (13, "GPU013")]


def test_lsp_hover_shows_host_shapes() -> None:
    from mimir.lsp import query

    src = "import torch\nx = torch.randn(4, 3)\ny = x.unsqueeze(0)\n"
    result = check_source("t.py", src)
    lines = src.splitlines()
    text, span = query.hover(result, lines, 3, 1)
    assert "y: [1, 4, 3]" in text and (span.line, span.column, span.end_column) == (3, 1, 2)
    assert query.hover(result, lines, 1, 3) is None  # `import torch`: nothing to show


def test_a_literal_constructor_call_elsewhere_in_the_project_is_the_configuration() -> None:
    model = REPO / "tests" / "projects" / "stated" / "net" / "model.py"
    (d,) = check_source(str(model), model.read_text()).diagnostics
    assert (d.span.line, d.code) == (19, "GPU100") and "expects 64 input features" in d.message
    stated = d.labels[-1]
    assert Path(stated.span.path).name == "example.py" and stated.span.line == 7
    assert stated.message.startswith("the sizes checked are those of `Tower(width=64")


@pytest.mark.parametrize(
    "src",
    [
        # free sizes: `Linear(w, w)` after `Linear(w, h)` holds when w == h, so no error
        "import torch.nn as nn\nclass T(nn.Module):\n    def __init__(self, w, h):\n"
        "        super().__init__()\n        self.a = nn.Linear(w, h)\n"
        "        self.b = nn.Linear(w, w)\n    def forward(self, x):\n"
        "        return self.b(self.a(x))\n",
        # a parameter that may be None is checked on both branches
        "import torch\ndef f(x, mask=None):\n    if mask is not None:\n"
        "        x = x.masked_fill(mask, 0.0)\n    return x.view(-1)\n",
        # a branch's assumption does not leak into the other branch
        "def f(x):\n    if x.shape[-1] == 3:\n        return x.view(-1, 3)\n"
        "    return x.view(-1, 4)\n",
        # a table of named settings that is not subscripted, or whose keys the module
        # reads of no configuration, states no configuration
        "import torch.nn as nn\nSIZES = {'a': dict(w=4, h=2), 'b': dict(w=8, h=3)}\n"
        "class T(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.a = nn.Linear(config.w, config.h)\n        self.b = nn.Linear(config.w, 5)\n"
        "    def forward(self, x):\n        return self.b(self.a(x))\n",
        "import torch.nn as nn\nrow = {'a': dict(p=4, q=2), 'b': dict(p=8, q=3)}['a']\n"
        "class T(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.a = nn.Linear(config.w, config.h)\n        self.b = nn.Linear(config.w, 5)\n"
        "    def forward(self, x):\n        return self.b(self.a(x))\n",
        # a flag nobody passes builds no configuration: a method reading what it builds
        # is not judged on it
        "import torch\nimport torch.nn as nn\nclass B(nn.Module):\n"
        "    def __init__(self, heads: int = 8, flag=False):\n        super().__init__()\n"
        "        if flag:\n            self.table = nn.Embedding(32, heads)\n"
        "    def bias(self, n):\n"
        "        return self.table(torch.arange(n)[:, None]).permute(2, 0)\n",
        # layers added under names a loop of unknown count makes: `items()` is not listed
        "import torch.nn as nn\nclass B(nn.ModuleDict):\n    def __init__(self, n, w):\n"
        "        super().__init__()\n        for i in range(n):\n"
        "            self.add_module('l%d' % i, nn.Linear(w + i, w + i + 1))\n"
        "    def forward(self, x):\n        for name, layer in self.items():\n"
        "            x = layer(x)\n        return x\n",
        # a module set on one path only: the container's members are not known
        "import torch.nn as nn\nclass S(nn.Sequential):\n    def __init__(self, wide):\n"
        "        super().__init__()\n        if wide:\n            self.up = nn.Linear(4, 8)\n"
        "        self.fc = nn.Linear(8, 2)\n",
    ],
)
def test_what_can_succeed_is_not_reported(src: str) -> None:
    assert _messages(src) == []


def test_a_module_moved_to_a_device_elsewhere_keeps_the_sizes_init_built() -> None:
    # `parallelize` sets `self.wte = self.wte.to(device)`: the embedding `forward` reads
    # is still 16 wide (GPT-2's model checked on its own, its blocks given the embedding)
    src = (
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.wte = nn.Embedding(50, 16)\n"
        "        self.norm = nn.LayerNorm(32)\n    def parallelize(self, device='cpu'):\n"
        "        self.wte = self.wte.to(device)\n    def forward(self, ids):\n"
        "        return self.norm(self.wte(ids))\n"
    )
    assert [(line, code) for line, code, _ in _messages(src)] == [(10, "GPU100")]


def test_a_demand_that_contradicts_an_earlier_one_is_reported() -> None:
    src = (
        "import torch.nn as nn\nclass T(nn.Module):\n    def __init__(self, d):\n"
        "        super().__init__()\n        self.a = nn.Linear(d, 4 * d)\n"
        "        self.b = nn.Linear(d, d)\n    def forward(self, x):\n"
        "        return self.b(self.a(x))\n"
    )
    ((line, code, message),) = _messages(src)
    assert (line, code) == (8, "GPU100") and "expects d input features" in message
    (d,) = _host(src).diagnostics
    assert d.why.endswith("it fails for every size the code admits")


def test_pytorch_has_the_functionals_the_table_knows() -> None:
    src = (
        "import torch\nimport torch.nn.functional as F\n"
        'if not hasattr(F, "scaled_dot_product_attention"):\n'
        "    y = torch.zeros(3, 4) @ torch.zeros(5, 6)\n"
        'if not hasattr(torch.nn.functional, "no_such_function"):\n'
        "    z = torch.zeros(3, 4) @ torch.zeros(5, 6)\n"
    )
    assert [(line, code) for line, code, _ in _messages(src)] == [(6, "GPU011")]


def test_a_path_two_demands_doom_is_reported_at_the_first_with_the_second_as_a_note() -> None:
    diags = _checked(REPO / "tests/fixtures/host/doomed_by_two_demands.py").diagnostics
    d = next(d for d in diags if d.span.line == 33)
    assert d.message.startswith("attention: query [b, 64, t] and key [b, 4, t, 16] differ")
    (note,) = [label for label in d.labels if label.span.line == 34]
    assert note.message.startswith(
        "where `t = 16` holds, this fails: `nn.Linear(dim, dim)` expects 64 input features"
    )
    assert d.why.endswith("it holds only where `t = 16`, and there line 34 fails: " + NEVER)


def test_coverage_counts_known_partial_and_unknown_expressions() -> None:
    src = (
        "import torch\nimport foo\nx = torch.randn(2, 3)\ny = x @ torch.randn(3, 4)\n"
        "z = foo.mystery(y)\ndef f(a):\n    return torch.nn.functional.gelu(a)\n"
    )
    cov = _host(src).coverage
    known, partial, unknown = cov.counts
    # `gelu(a)` of a parameter nobody annotated: no size known, and no call to blame
    assert known >= 2 and unknown == 2 and partial == 0
    assert cov.top_reasons() == [("unknown call `foo.mystery`", 1)]
    assert "unknown call `foo.mystery`" in cov.summary()
    assert _host(src).shapes[(5, 1)] == "unknown: unknown call `foo.mystery`"


def test_lsp_hover_on_an_unknown_value_says_why() -> None:
    from mimir.lsp import query

    src = "import torch\nimport foo\nx = torch.randn(4, 3)\ny = foo.mystery(x)\n"
    result = check_source("t.py", src)
    text, _ = query.hover(result, src.splitlines(), 4, 1)
    assert "y: ?" in text and "unknown call `foo.mystery`" in text


def test_check_coverage_option_prints_a_line_per_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = tmp_path / "m.py"
    src.write_text(
        "import torch\nimport foo\nx = torch.randn(2, 3)\ny = x @ torch.randn(3, 4)\n"
        "z = foo.mystery(y)\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mimir", "check", "--no-cache", "--coverage", str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    line = next(row for row in run.stderr.splitlines() if row.startswith(str(src)))
    assert "tensor expressions" in line and "unknown call `foo.mystery`" in line


def test_a_failure_inside_an_imported_module_is_reported_at_the_call_with_a_note() -> None:
    example = REPO / "tests" / "projects" / "stated" / "example.py"
    (d,) = check_source(str(example), example.read_text()).diagnostics
    assert (d.span.line, d.code) == (11, "GPU100")
    inside = d.labels[-1]
    assert Path(inside.span.path).name == "model.py" and inside.span.line == 19
    assert inside.message == "it fails here, in `model.py`"


def test_a_readme_usage_example_states_the_configuration() -> None:
    """The README's Python block builds `ReAttention(dim=64, heads=4)`: the note points at
    that line of the README (the fenced shell block and the `>>>` session are skipped)."""
    model = REPO / "tests" / "projects" / "readme_stated" / "vitlike" / "model.py"
    (d,) = check_source(str(model), model.read_text()).diagnostics
    stated = d.labels[-1]
    assert Path(stated.span.path).name == "README.md"
    assert (stated.span.line, stated.span.column) == (13, 8)
    assert stated.message == "the sizes checked are those of `ReAttention(dim=64, heads=4)`"


@pytest.mark.parametrize(
    ("imported", "caught", "found"),
    [
        ("from apex.normalization import FusedRMSNorm as fused", "ImportError", True),
        ("import apex.normalization as fused", "(ImportError, AttributeError)", True),
        ("from apex.normalization import FusedRMSNorm as fused", "ValueError", False),
        ("from os.path import join as fused", "ImportError", False),
        ("from torch.nn import RMSNorm as fused", "ImportError", False),
    ],
)
def test_only_a_package_nobody_knows_under_an_import_handler_takes_the_fallback(
    imported: str, caught: str, found: bool
) -> None:
    src = (
        "import torch\n"
        "def norm(x):\n"
        "    return torch.ones(2048) * x\n"
        "try:\n"
        f"    {imported}\n"
        "    norm = fused\n"
        f"except {caught}:\n"
        "    pass\n"
        "def f():\n"
        "    return norm(torch.zeros(3, 512))\n"
    )
    assert [(line, code) for line, code, _ in _messages(src)] == ([(3, "GPU010")] if found else [])


def test_a_note_in_another_file_is_named_as_the_checked_files_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README and an imported module are found by their absolute paths; a note
    names them relative to the working folder they lie below, as the files checked are."""
    from mimir.diagnostics.render import text

    monkeypatch.chdir(REPO)
    model = "tests/projects/readme_stated/vitlike/model.py"
    (d,) = check_source(model, (REPO / model).read_text()).diagnostics
    assert "  note: tests/projects/readme_stated/README.md:13:8: the sizes" in text.render(d)
    example = "tests/projects/stated/example.py"
    (d,) = check_source(example, (REPO / example).read_text()).diagnostics
    assert "  note: tests/projects/stated/net/model.py:19:16: it fails here" in text.render(d)
    assert str(REPO) not in text.render(d)
