// Dim expressions of a Mimir manifest: `"N"`, `"cdiv(N * M, 256)"`, `"(K + 3) // 4"`.
//
// The grammar (the same as mimir/runtime/dimexpr.py, which parses with Python's `ast`):
//
//   expr := INT | NAME | expr ("+" | "-" | "*" | "//" | "%") expr
//         | "-" expr | "+" expr | "(" expr ")" | "cdiv(" expr "," expr ")"
//
// `//` and `%` are Python's floor division and modulo; `cdiv(a, b)` is the ceiling of a / b
// and needs b > 0. Arithmetic is exact (BigInt); a result beyond Number.MAX_SAFE_INTEGER is
// an error. The text is parsed, never evaluated as JavaScript.

export class DimExprError extends Error {
  constructor(message) {
    super(message);
    this.name = 'DimExprError';
  }
}

const TOKEN = /\s*(?:(\d+(?:_\d+)*)|([A-Za-z_][A-Za-z0-9_]*)|(\/\/|[-+*%(),]))/y;

function tokenize(text) {
  const tokens = [];
  TOKEN.lastIndex = 0;
  let pos = 0;
  while (pos < text.length) {
    if (/^\s*$/.test(text.slice(pos))) break;
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(text);
    if (!m) {
      throw new DimExprError(`malformed dim expression ${JSON.stringify(text)} at column ${pos + 1}`);
    }
    pos = TOKEN.lastIndex;
    if (m[1] !== undefined) {
      if (m[1].length > 1 && m[1][0] === '0' && /[1-9]/.test(m[1])) {
        throw new DimExprError(`malformed dim expression ${JSON.stringify(text)}: leading zeros`);
      }
      tokens.push({ kind: 'int', value: BigInt(m[1].replaceAll('_', '')) });
    } else if (m[2] !== undefined) {
      tokens.push({ kind: 'name', value: m[2] });
    } else {
      tokens.push({ kind: 'op', value: m[3] });
    }
  }
  return tokens;
}

// A parsed expression is a small tree: {int}, {name}, {neg}, {pos}, {op, a, b}, {cdiv: [a, b]}.
const cache = new Map();

/** Parse and validate a dim expression string; throws DimExprError. */
export function parse(text) {
  if (typeof text !== 'string') {
    throw new DimExprError(`a dim expression must be a string, got ${typeof text}`);
  }
  const hit = cache.get(text);
  if (hit) return hit;
  const tokens = tokenize(text);
  let i = 0;
  const peek = () => tokens[i];
  const isOp = (v) => peek() && peek().kind === 'op' && peek().value === v;
  const fail = (why) => {
    throw new DimExprError(`malformed dim expression ${JSON.stringify(text)}: ${why}`);
  };
  const expect = (v) => {
    if (!isOp(v)) fail(`expected ${JSON.stringify(v)}`);
    i += 1;
  };
  function expr() {
    let node = term();
    while (isOp('+') || isOp('-')) {
      const op = tokens[i++].value;
      node = { op, a: node, b: term() };
    }
    return node;
  }
  function term() {
    let node = unary();
    while (isOp('*') || isOp('//') || isOp('%')) {
      const op = tokens[i++].value;
      node = { op, a: node, b: unary() };
    }
    return node;
  }
  function unary() {
    if (isOp('-')) {
      i += 1;
      return { neg: unary() };
    }
    if (isOp('+')) {
      i += 1;
      return { pos: unary() };
    }
    return atom();
  }
  function atom() {
    const t = peek();
    if (!t) fail('unexpected end');
    if (t.kind === 'int') {
      i += 1;
      return { int: t.value };
    }
    if (t.kind === 'name') {
      i += 1;
      if (isOp('(')) {
        if (t.value !== 'cdiv') {
          throw new DimExprError(`only \`cdiv(a, b)\` may be called in dim expression ${JSON.stringify(text)}`);
        }
        i += 1;
        const args = [];
        while (!isOp(')')) {
          args.push(expr());
          if (isOp(',')) i += 1;
          else if (!isOp(')')) fail('expected "," or ")"');
        }
        i += 1;
        if (args.length !== 2) {
          throw new DimExprError(`\`cdiv\` takes exactly two positional arguments in ${JSON.stringify(text)}`);
        }
        return { cdiv: args };
      }
      return { name: t.value };
    }
    if (isOp('(')) {
      i += 1;
      const node = expr();
      if (isOp(',')) fail('a tuple is not allowed');
      expect(')');
      return node;
    }
    return fail(`unexpected ${JSON.stringify(t.value)}`);
  }
  if (tokens.length === 0) fail('empty');
  const tree = expr();
  if (i !== tokens.length) fail(`unexpected ${JSON.stringify(tokens[i].value)}`);
  if (cache.size > 1024) cache.clear();
  cache.set(text, tree);
  return tree;
}

/** The dim names an expression mentions. */
export function names(expr) {
  const out = new Set();
  if (typeof expr === 'number') return out;
  const walk = (n) => {
    if (n.name !== undefined) out.add(n.name);
    else if (n.neg) walk(n.neg);
    else if (n.pos) walk(n.pos);
    else if (n.cdiv) n.cdiv.forEach(walk);
    else if (n.op) {
      walk(n.a);
      walk(n.b);
    }
  };
  walk(parse(expr));
  return out;
}

const floorDiv = (a, b) => {
  const q = a / b; // BigInt division truncates toward zero
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
};
const floorMod = (a, b) => a - floorDiv(a, b) * b;

function evalNode(n, env, text) {
  if (n.int !== undefined) return n.int;
  if (n.name !== undefined) {
    if (!Object.prototype.hasOwnProperty.call(env, n.name)) {
      throw new DimExprError(`dim \`${n.name}\` has no value (in ${JSON.stringify(text)})`);
    }
    const v = env[n.name];
    if (typeof v === 'bigint') return v;
    if (typeof v !== 'number' || !Number.isInteger(v)) {
      throw new DimExprError(`dim \`${n.name}\` must be bound to an integer, got ${String(v)}`);
    }
    return BigInt(v);
  }
  if (n.neg) return -evalNode(n.neg, env, text);
  if (n.pos) return evalNode(n.pos, env, text);
  if (n.cdiv) {
    const a = evalNode(n.cdiv[0], env, text);
    const b = evalNode(n.cdiv[1], env, text);
    if (b <= 0n) throw new DimExprError(`cdiv by a non-positive divisor: cdiv(${a}, ${b})`);
    return -floorDiv(-a, b);
  }
  const a = evalNode(n.a, env, text);
  const b = evalNode(n.b, env, text);
  switch (n.op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default:
      if (b === 0n) throw new DimExprError(`division by zero in dim expression ${JSON.stringify(text)}`);
      return n.op === '//' ? floorDiv(a, b) : floorMod(a, b);
  }
}

/**
 * The integer value of a manifest size (a non-negative int or an expression string) under `env`
 * (dim name -> integer).
 */
export function evaluate(expr, env) {
  if (typeof expr === 'number') {
    if (!Number.isInteger(expr)) throw new DimExprError(`a size must be an integer, got ${expr}`);
    return expr;
  }
  if (typeof expr !== 'string') {
    throw new DimExprError(`a dim expression must be an int or a string, got ${typeof expr}`);
  }
  const value = evalNode(parse(expr), env, expr);
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < -BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new DimExprError(`dim expression ${JSON.stringify(expr)} is too large: ${value}`);
  }
  return Number(value);
}
