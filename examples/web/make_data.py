"""Write examples/web/data.json: the demo model's weights and inputs, deterministically.

    python examples/web/make_data.py          # rewrites data.json
    python examples/web/make_data.py --check  # exit 1 when data.json is stale

The model (`classify` in model.py) is a template matcher with nothing trained: hidden unit j
< 10 responds to digit j's 8x8 glyph (its weights are the glyph, centred and normalised), the
other hidden units get small seeded random weights, and the output layer reads each digit's
unit. The inputs are the ten glyphs with a few pixels flipped (seeded), so the right answer
is known. Every number is rounded to float32 first, so the file is exactly what both the
browser and the shim read. Stdlib-only.
"""

from __future__ import annotations

import json
import math
import random
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data.json"
HIDDEN = 16
FLIPS = 5

# The digits 0-9, side by side: 8 rows of ten 8-pixel glyphs.
_SHEET = """
..####.. ...##... ..####.. ..####.. .....#.. .######. ..####.. .######. ..####.. ..####..
.#....#. ..###... .#....#. .#....#. ....##.. .#...... .#...... ......#. .#....#. .#....#.
#......# .#.##... ......#. ......#. ...#.#.. .#...... #....... .....#.. .#....#. #......#
#......# ...##... .....#.. ...###.. ..#..#.. .#####.. #.####.. ....#... ..####.. .#.....#
#......# ...##... ....#... ......#. .#...#.. ......#. ##....#. ...#.... .#....#. ..######
#......# ...##... ...#.... ......#. .######. ......#. #......# ...#.... #......# .......#
.#....#. ...##... ..#..... .#....#. .....#.. .#....#. .#....#. ...#.... .#....#. ......#.
..####.. .######. .######. ..####.. .....#.. ..####.. ..####.. ...#.... ..####.. ..###...
"""
GLYPHS = [[row.split()[d] for row in _SHEET.strip().splitlines()] for d in range(10)]


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def pixels(glyph: list[str]) -> list[float]:
    return [1.0 if c == "#" else 0.0 for row in glyph for c in row]


def build() -> dict:
    rng = random.Random(14)
    w1 = [[0.0] * HIDDEN for _ in range(64)]
    for j, glyph in enumerate(GLYPHS):
        p = pixels(glyph)
        mean = sum(p) / 64
        centred = [v - mean for v in p]
        norm = math.sqrt(sum(v * v for v in centred))
        for i in range(64):
            w1[i][j] = centred[i] / norm
    for j in range(len(GLYPHS), HIDDEN):
        for i in range(64):
            w1[i][j] = rng.uniform(-0.05, 0.05)
    b1 = [0.0] * HIDDEN
    w2 = [
        [(8.0 if j == k else 0.0) + rng.uniform(-0.1, 0.1) for k in range(10)]
        for j in range(HIDDEN)
    ]
    b2 = [0.0] * 10
    x, labels = [], []
    for digit, glyph in enumerate(GLYPHS):
        p = pixels(glyph)
        for i in rng.sample(range(64), FLIPS):
            p[i] = 1.0 - p[i]
        x.append(p)
        labels.append(digit)

    def flat(rows: list) -> list[float]:
        return [f32(v) for row in rows for v in (row if isinstance(row, list) else [row])]

    return {
        "about": "Written by examples/web/make_data.py; see its docstring.",
        "dims": {"B": len(x), "H": HIDDEN},
        "labels": labels,
        "inputs": {"x": flat(x), "w1": flat(w1), "b1": flat(b1), "w2": flat(w2), "b2": flat(b2)},
    }


def render(data: dict) -> str:
    inputs = data["inputs"]
    lines = [
        "{",
        f'  "about": {json.dumps(data["about"])},',
        f'  "dims": {json.dumps(data["dims"])},',
        f'  "labels": {json.dumps(data["labels"])},',
        '  "inputs": {',
    ]
    names = list(inputs)
    for n, name in enumerate(names):
        comma = "," if n < len(names) - 1 else ""
        lines.append(f'    "{name}": {json.dumps(inputs[name])}{comma}')
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render(build())
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python examples/web/make_data.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
