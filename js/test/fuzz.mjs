// Property-based fuzzing of the host's manifest reader with fast-check (no GPU needed).
//
//   node test/fuzz.mjs --seed 1 --runs 400          a fixed run (tests/test_manifest_fuzz.py)
//   node test/fuzz.mjs --seed 7 --seconds 1800      a long one (benchmarks/fuzz_manifests.py)
//
// Properties, as tests/manifest_fuzzing.py states them for the Python host:
// - reader: any bytes (a committed manifest with its JSON edited or bytes mutated, or anything)
//   are accepted or refused with a contract code (MAN001..MAN009), never anything else; sizes,
//   launches, ranges and the uniform of an accepted manifest, at several dims, are in bounds or
//   refused with their codes;
// - expressions: a dim expression from a random tree evaluates to the tree's exact value, or is
//   refused (MAN005) exactly when the tree leaves int64, divides by zero or nests too deep;
// - json: the text of any JSON value is read as JSON.parse reads it, or refused (MAN001) only
//   for what the contract refuses (nesting, U+0000, a lone surrogate).
// Prints `runs N` (all properties) and exits 1 with the counterexample on a failure.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { bufferExtent, checkManifest, launchCounts, parseManifest, rangeBounds } from '../src/contract.js';
import { evaluateBig, MAX_DEPTH, MAX_LENGTH } from '../src/dimexpr.js';
import { ManifestError } from '../src/errors.js';
import { checkDims, packUniform } from '../src/layout.js';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const seed = Number(args.seed ?? 1);
const runs = Number(args.runs ?? 400);
const seconds = args.seconds ? Number(args.seconds) : null;

const MAN = new Set(['MAN001', 'MAN002', 'MAN003', 'MAN004', 'MAN005', 'MAN006', 'MAN007', 'MAN008', 'MAN009']);
const ARGUMENT = new Set(['GPU035', 'GPU040', 'GPU041', 'GPU042', 'GPU043']);

const tests = fileURLToPath(new URL('../../tests/', import.meta.url));
function seedManifests() {
  const out = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.manifest.json')) out.push(path);
    }
  };
  walk(join(tests, 'kernels', 'out'));
  out.sort();
  const found = join(tests, 'data', 'hostile');
  let fixtures = [];
  try {
    fixtures = readdirSync(found).filter((n) => n.endsWith('.json')).sort().map((n) => join(found, n));
  } catch {
    fixtures = [];
  }
  return [...out.filter((_, i) => i % 7 === 0), ...fixtures].map((p) => new Uint8Array(readFileSync(p)));
}
const SEEDS = seedManifests();

function refusedWith(err, codes) {
  if (!(err instanceof ManifestError) || !codes.has(err.code)) throw err;
}

/** The whole reader on `bytes`: a value or a coded refusal, never anything else. */
function checkReader(bytes) {
  let value;
  try {
    value = parseManifest(bytes);
    checkManifest(value);
  } catch (err) {
    refusedWith(err, MAN);
    return;
  }
  for (const size of [0, 1, 37, 65536, 2 ** 32 - 1]) {
    const dims = Object.fromEntries(value.dims.map((d) => [d.name, size]));
    try {
      checkDims(value, dims);
    } catch (err) {
      refusedWith(err, ARGUMENT);
      continue;
    }
    value.buffers.forEach((b, i) => {
      try {
        const [shape, count, bytes] = bufferExtent(value, i, dims, 2 ** 27);
        assert.ok(shape.every((n) => n >= 0 && n < 2 ** 32) && count >= 0 && count < 2 ** 32 && bytes <= 2 ** 27);
        if (b.range != null) rangeBounds(value, i, dims);
      } catch (err) {
        refusedWith(err, new Set(['MAN005', 'MAN006']));
      }
    });
    value.kernels.forEach((_, i) => {
      try {
        const counts = launchCounts(value, i, dims, [65535, 65535, 65535]);
        assert.ok(counts.every((n) => n >= 0 && n <= 65535));
      } catch (err) {
        refusedWith(err, new Set(['MAN005', 'MAN007']));
      }
    });
    const scalars = Object.fromEntries((value.uniform?.fields ?? []).map((f) => [f.name, 1]));
    try {
      const block = packUniform(value, dims, scalars);
      assert.ok(block === null || (block.byteLength % 16 === 0 && block.byteLength <= 4096));
    } catch (err) {
      refusedWith(err, ARGUMENT);
    }
  }
}

// ---------------------------------------------------------------- inputs

const leaves = fc.oneof(
  fc.constant(null), fc.boolean(), fc.integer(), fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(Number),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom('N', 'cdiv(N, 0)', '../x.spv', `${'-'.repeat(40)}1`, '9'.repeat(30), '\u0000', 'x'.repeat(200)),
  fc.string({ maxLength: 12 }),
);
const jsonValues = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leaves, fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 4 })),
})).value;

function paths(value, prefix = []) {
  const out = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  return out;
}

const edited = fc.tuple(fc.nat(), fc.array(fc.tuple(fc.nat(), jsonValues), { minLength: 1, maxLength: 3 })).map(([which, edits]) => {
  const value = JSON.parse(new TextDecoder().decode(SEEDS[which % SEEDS.length]));
  for (const [where, replacement] of edits) {
    const all = paths(value).slice(1);
    if (!all.length) break;
    const path = all[where % all.length];
    let target = value;
    for (const key of path.slice(0, -1)) target = target[key];
    target[path[path.length - 1]] = replacement;
  }
  return new TextEncoder().encode(JSON.stringify(value));
});

const CHUNKS = ['[', '{', '\\u0000', '\xff', '"', '-', '9999999999999999999', '//0'].map((s) => Uint8Array.from(s, (c) => c.charCodeAt(0)));
const mutated = fc.tuple(
  fc.nat(),
  fc.array(fc.tuple(fc.nat(), fc.constantFrom('insert', 'delete', 'replace'), fc.oneof(fc.uint8Array({ minLength: 1, maxLength: 4 }), fc.constantFrom(...CHUNKS))), { minLength: 1, maxLength: 6 }),
).map(([which, edits]) => {
  let data = [...SEEDS[which % SEEDS.length]];
  for (const [at, kind, chunk] of edits) {
    const i = at % (data.length + 1);
    if (kind === 'insert') data.splice(i, 0, ...chunk);
    else if (kind === 'delete') data.splice(i, chunk.length);
    else data.splice(i, chunk.length, ...chunk);
  }
  return Uint8Array.from(data);
});

const readerInputs = fc.oneof(edited, mutated, fc.uint8Array({ maxLength: 64 }));

// ---------------------------------------------------------------- dim expressions

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const OVER = Symbol('over');
const ENV = { N: 37n, M: 65535n, K: 0n };
const fits = (v) => (v === OVER || v < INT64_MIN || v > INT64_MAX ? OVER : v);
const floorDiv = (a, b) => {
  const q = a / b;
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
};

// [text, exact value or OVER, depth in the grammar's sense]
const trees = fc.letrec((tie) => ({
  tree: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(fc.constantFrom('N', 'M', 'K').map((n) => [n, ENV[n], 0]), fc.bigInt({ min: 0n, max: 100n }).map((n) => [String(n), n, 0]),
      fc.bigInt({ min: 2n ** 62n, max: 2n ** 66n }).map((n) => [String(n), n > INT64_MAX ? OVER : n, 0])),
    fc.tuple(fc.constantFrom('+', '-', '*', '//', '%', 'cdiv'), tie('tree'), tie('tree')).map(([op, [at, a, ad], [bt, b, bd]]) => {
      const depth = Math.max(ad, bd) + 1;
      if (op === 'cdiv') return [`cdiv(${at}, ${bt})`, a === OVER || b === OVER || b <= 0n ? OVER : fits(-floorDiv(-a, b)), depth];
      const text = `(${at}) ${op} (${bt})`;
      if (a === OVER || b === OVER || ((op === '//' || op === '%') && b === 0n)) return [text, OVER, depth];
      const exact = { '+': () => a + b, '-': () => a - b, '*': () => a * b, '//': () => floorDiv(a, b), '%': () => a - floorDiv(a, b) * b }[op]();
      return [text, fits(exact), depth];
    }),
    tie('tree').map(([t, v, d]) => [`-(${t})`, v === OVER ? OVER : fits(-v), d + 2]),
    tie('tree').map(([t, v, d]) => [`(${t})`, v, d + 1]),
  ),
})).tree;

function checkExpression([text, value, depth]) {
  const refuse = value === OVER || depth > MAX_DEPTH || text.length > MAX_LENGTH;
  let got;
  try {
    got = evaluateBig(text, ENV);
  } catch (err) {
    refusedWith(err, new Set(['MAN005']));
    assert.ok(refuse, `refused ${text}: ${err.message}`);
    return;
  }
  assert.ok(!refuse, `accepted ${text} = ${got}`);
  assert.equal(got, value, text);
}

// ---------------------------------------------------------------- JSON as JSON.parse reads it

const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
function depthOf(v) {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (v !== null && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}
function strings(v, out = []) {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) v.forEach((x) => strings(x, out));
  else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) { out.push(k); strings(x, out); }
  return out;
}
function checkJson(value) {
  const text = JSON.stringify(value);
  if (text === undefined) return;
  const allowed = depthOf(value) <= 32 && !strings(value).some((s) => s.includes('\u0000') || LONE.test(s));
  let got;
  try {
    got = parseManifest(new TextEncoder().encode(text));
  } catch (err) {
    refusedWith(err, new Set(['MAN001']));
    assert.ok(!allowed, `refused ${text.slice(0, 200)}: ${err.message}`);
    return;
  }
  assert.ok(allowed, `accepted ${text.slice(0, 200)}`);
  assert.deepEqual(got, JSON.parse(text));
}
const nested = fc.tuple(fc.integer({ min: 28, max: 36 }), fc.jsonValue({ maxDepth: 2 }), fc.boolean()).map(([depth, inner, asObject]) => {
  let v = inner;
  for (let i = 0; i < depth; i += 1) v = asObject ? { k: v } : [v];
  return v;
});
const anyJson = fc.oneof(fc.jsonValue({ maxDepth: 40 }), fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }), nested);

// ---------------------------------------------------------------- run

const properties = [
  ['reader', fc.property(readerInputs, (bytes) => checkReader(bytes))],
  ['expressions', fc.property(trees, (tree) => checkExpression(tree))],
  ['json', fc.property(anyJson, (value) => checkJson(value))],
];
let total = 0;
const start = Date.now();
for (let round = 0; ; round += 1) {
  for (const [name, property] of properties) {
    const outcome = fc.check(property, { seed: seed + round, numRuns: runs });
    total += outcome.numRuns;
    if (outcome.failed) {
      console.log(`finding in ${name} (seed ${seed + round}): ${fc.defaultReportMessage(outcome)}`);
      console.log(`runs ${total}`);
      process.exit(1);
    }
  }
  if (seconds === null || (Date.now() - start) / 1000 >= seconds) break;
}
console.log(`runs ${total}`);
console.log(`seconds ${((Date.now() - start) / 1000).toFixed(1)}`);
