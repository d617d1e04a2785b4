// Dim expressions of a Mimir manifest: `"N"`, `"cdiv(N * M, 256)"`, `"(K + 3) // 4"`.
//
// The grammar, the limits and the arithmetic are those of mimir/runtime/dimexpr.py (and of the
// C hosts), so that every host gets the same value or the same refusal:
//
//   expr  := term (("+" | "-") term)*
//   term  := unary (("*" | "//" | "%") unary)*
//   unary := ("-" | "+") unary | atom
//   atom  := INT | NAME | "cdiv" "(" expr "," expr ")" | "(" expr ")"
//   INT   := "0" | [1-9][0-9]*        NAME := [A-Za-z_][A-Za-z0-9_]*
//
// with spaces between tokens. `//` and `%` are Python's floor division and modulo; `cdiv(a, b)`
// is the ceiling of a / b and needs b > 0. At most 1024 characters and 32 levels of parentheses,
// `cdiv(` and unary signs. Arithmetic is exact (BigInt) and every value must lie in the signed
// 64-bit range. Every refusal is a DimExprError (code MAN005). The text is parsed, never
// evaluated as JavaScript.

import { DimExprError } from './errors.js';

export { DimExprError } from './errors.js';

export const MAX_LENGTH = 1024;
export const MAX_DEPTH = 32;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const TOKEN = / *(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(\/\/|[-+*%(),]))/y;
const short = (text) => JSON.stringify(text.length <= 80 ? text : `${text.slice(0, 77)}...`);

function tokenize(text) {
  const tokens = [];
  const end = text.replace(/ +$/, '').length;
  let pos = 0;
  while (pos < end) {
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(text);
    if (!m) throw new DimExprError(`malformed dim expression ${short(text)} at column ${pos + 1}`);
    pos = TOKEN.lastIndex;
    if (m[1] !== undefined) {
      if (m[1].length > 1 && m[1][0] === '0') {
        throw new DimExprError(`malformed dim expression ${short(text)}: leading zeros`);
      }
      tokens.push({ kind: 'int', value: m[1] });
    } else if (m[2] !== undefined) {
      tokens.push({ kind: 'name', value: m[2] });
    } else {
      tokens.push({ kind: 'op', value: m[3] });
    }
  }
  return tokens;
}

// A parsed expression is postfix code: ['int', v], ['name', s], ['neg'], ['cdiv'] or a binary
// operator; evaluating it needs a stack, not recursion.
const cache = new Map();

/** Parse and validate a dim expression string (postfix code); throws DimExprError. */
export function parse(text) {
  if (typeof text !== 'string') {
    throw new DimExprError(`a dim expression must be a string, got ${typeof text}`);
  }
  const hit = cache.get(text);
  if (hit) return hit;
  if (text.length > MAX_LENGTH) {
    throw new DimExprError(`dim expression is ${text.length} characters long, over ${MAX_LENGTH}`);
  }
  const tokens = tokenize(text);
  const code = [];
  let i = 0;
  let depth = 0;
  const isOp = (v) => i < tokens.length && tokens[i].kind === 'op' && tokens[i].value === v;
  const fail = (why) => new DimExprError(`malformed dim expression ${short(text)}: ${why}`);
  const enter = () => {
    depth += 1;
    if (depth > MAX_DEPTH) {
      throw new DimExprError(`dim expression ${short(text)} nests deeper than ${MAX_DEPTH} levels`);
    }
  };
  const twoArguments = () => new DimExprError(`\`cdiv\` takes exactly two arguments in ${short(text)}`);
  function expr() {
    term();
    while (isOp('+') || isOp('-')) {
      const op = tokens[i++].value;
      term();
      code.push([op]);
    }
  }
  function term() {
    unary();
    while (isOp('*') || isOp('//') || isOp('%')) {
      const op = tokens[i++].value;
      unary();
      code.push([op]);
    }
  }
  function unary() {
    if (isOp('-') || isOp('+')) {
      const negate = tokens[i++].value === '-';
      enter();
      unary();
      depth -= 1;
      if (negate) code.push(['neg']);
      return;
    }
    atom();
  }
  function atom() {
    if (i >= tokens.length) throw fail('unexpected end');
    const t = tokens[i++];
    if (t.kind === 'int') {
      const value = BigInt(t.value);
      if (value > INT64_MAX) {
        throw new DimExprError(`integer ${short(t.value)} in ${short(text)} is outside the 64-bit range`);
      }
      code.push(['int', value]);
      return;
    }
    if (t.kind === 'name') {
      if (!isOp('(')) {
        code.push(['name', t.value]);
        return;
      }
      if (t.value !== 'cdiv') {
        throw new DimExprError(`only \`cdiv(a, b)\` may be called in dim expression ${short(text)}`);
      }
      i += 1;
      enter();
      expr();
      if (!isOp(',')) throw twoArguments();
      i += 1;
      expr();
      if (!isOp(')')) throw twoArguments();
      i += 1;
      depth -= 1;
      code.push(['cdiv']);
      return;
    }
    if (t.value === '(') {
      enter();
      expr();
      if (!isOp(')')) throw fail("expected ')'");
      i += 1;
      depth -= 1;
      return;
    }
    throw fail(`unexpected ${JSON.stringify(t.value)}`);
  }
  if (tokens.length === 0) throw fail('empty');
  expr();
  if (i !== tokens.length) throw fail(`unexpected ${JSON.stringify(tokens[i].value)}`);
  if (cache.size > 1024) cache.clear();
  cache.set(text, code);
  return code;
}

/** The dim names an expression mentions. */
export function names(expr) {
  if (typeof expr === 'number') return new Set();
  return new Set(parse(expr).filter((step) => step[0] === 'name').map((step) => step[1]));
}

const floorDiv = (a, b) => {
  const q = a / b; // BigInt division truncates toward zero
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
};

function fits(value, text) {
  if (value < INT64_MIN || value > INT64_MAX) {
    throw new DimExprError(`dim expression ${short(text)} leaves the 64-bit range (${value})`);
  }
  return value;
}

function lookup(env, name, text) {
  if (!Object.prototype.hasOwnProperty.call(env, name)) {
    throw new DimExprError(`dim \`${name}\` has no value (in ${short(text)})`);
  }
  const v = env[name];
  if (typeof v === 'bigint') return fits(v, text);
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw new DimExprError(`dim \`${name}\` must be bound to an integer, got ${String(v)}`);
  }
  return BigInt(v);
}

function apply(op, a, b, text) {
  switch (op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    case 'cdiv':
      if (b <= 0n) throw new DimExprError(`cdiv by a non-positive divisor: cdiv(${a}, ${b}) in ${short(text)}`);
      return -floorDiv(-a, b);
    default:
      if (b === 0n) throw new DimExprError(`division by zero in dim expression ${short(text)}`);
      return op === '//' ? floorDiv(a, b) : a - floorDiv(a, b) * b;
  }
}

/** The exact value (a BigInt) of a manifest size (an integer or an expression) under `env`. */
export function evaluateBig(expr, env) {
  if (typeof expr === 'number') {
    if (!Number.isSafeInteger(expr)) throw new DimExprError(`a size must be an integer, got ${expr}`);
    return BigInt(expr);
  }
  if (typeof expr !== 'string') {
    throw new DimExprError(`a dim expression must be an int or a string, got ${typeof expr}`);
  }
  const stack = [];
  for (const step of parse(expr)) {
    const op = step[0];
    if (op === 'int') stack.push(step[1]);
    else if (op === 'name') stack.push(lookup(env, step[1], expr));
    else if (op === 'neg') stack.push(fits(-stack.pop(), expr));
    else {
      const b = stack.pop();
      const a = stack.pop();
      stack.push(fits(apply(op, a, b, expr), expr));
    }
  }
  return stack[0];
}

/**
 * The integer value of a manifest size (a non-negative int or an expression string) under `env`
 * (dim name -> integer), as a Number: a value past Number.MAX_SAFE_INTEGER is refused (the
 * host's own size checks use evaluateBig, which is exact).
 */
export function evaluate(expr, env) {
  const value = evaluateBig(expr, env);
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < -BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new DimExprError(`dim expression ${JSON.stringify(expr)} is too large: ${value}`);
  }
  return Number(value);
}
