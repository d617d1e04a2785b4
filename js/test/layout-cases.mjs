// Test driver, no GPU: evaluate dim expressions, float16 rounding and uniform packing with the
// host's own code, so a Python test can compare them with mimir.runtime.
//
//   node test/layout-cases.mjs CASES.json
//
// CASES.json: {"exprs": [[TEXT_OR_INT, ENV]], "halves": [NUMBER | "inf" | "-inf" | "nan"],
//   "uniforms": [[MANIFEST, DIMS, SCALARS]]}. Prints the same keys with, per case, the value
// (a uniform as hex bytes, a half as its bits) or {"error": MESSAGE}.
import { readFileSync } from 'node:fs';
import { evaluate, packUniform, toHalfBits, fromHalfBits } from '../src/index.js';

const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const attempt = (f) => {
  try {
    return f();
  } catch (err) {
    return { error: `${err.name}: ${err.message}` };
  }
};
const num = (v) => ({ inf: Infinity, '-inf': -Infinity, nan: NaN })[v] ?? v;
const hex = (buf) => (buf === null ? null : Buffer.from(buf).toString('hex'));
console.log(JSON.stringify({
  exprs: (cases.exprs ?? []).map(([e, env]) => attempt(() => evaluate(e, env))),
  halves: (cases.halves ?? []).map((v) => attempt(() => {
    const bits = toHalfBits(num(v));
    const back = fromHalfBits(bits);
    return { bits, back: Number.isNaN(back) ? 'nan' : Number.isFinite(back) ? back : String(back).replace('Infinity', 'inf') };
  })),
  uniforms: (cases.uniforms ?? []).map(([m, d, s]) => attempt(() => hex(packUniform(m, d, s)))),
}));
